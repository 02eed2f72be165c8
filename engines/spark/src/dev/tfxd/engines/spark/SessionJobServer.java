package dev.tfxd.engines.spark;

import org.apache.beam.runners.spark.SparkJobServerDriver;
import org.apache.beam.runners.spark.SparkPipelineOptions;
import org.apache.beam.runners.spark.translation.SparkContextFactory;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Beam's Spark job server whose one SparkContext starts with it, not inside the run's first job.
 *
 * <p>An embedded Spark (a {@code local[N]} master, with Beam's context reuse on:
 * {@code beam.spark.test.reuseSparkContext}, which tfxd sets for the engine it embeds) keeps one
 * SparkContext for every job of the run; Beam's SparkContextFactory makes it when the first job asks,
 * so the run's first component waits a second or more for Spark's driver, block manager and UI. Here a
 * thread asks the same factory for it as the job server starts, with the master the job server hands
 * every job (SparkJobInvoker): the first job finds it made, or waits for it behind the factory's lock. A
 * context that cannot start is said so in the log, and the first job tries again itself, failing with
 * Spark's reason. Any other master, or reuse off: Beam's driver as it is.
 */
public final class SessionJobServer {
  static final String MASTER_FLAG = "--spark-master-url=";
  static final String EMBEDDED_PREFIX = "local";
  static final String APP_NAME = "tfxd";
  private static final Logger LOG = LoggerFactory.getLogger(SessionJobServer.class);

  private SessionJobServer() {}

  // Beam deprecates the reuse property in favour of a context a program provides and each job asks for
  // in its options (usesProvidedSparkContext); the jobs here come from Python, which does not ask.
  @SuppressWarnings("deprecation")
  public static void main(String[] args) throws Exception {
    String master = null;
    for (String arg : args) {
      if (arg.startsWith(MASTER_FLAG)) {
        master = arg.substring(MASTER_FLAG.length());
      }
    }
    if (master != null
        && master.startsWith(EMBEDDED_PREFIX)
        && Boolean.getBoolean(SparkContextFactory.TEST_REUSE_SPARK_CONTEXT)) {
      starting(master);
    }
    SparkJobServerDriver.main(args);
  }

  /**
   * The run's context, made on a thread of its own while the job server starts. Any Exception is caught:
   * Spark's Scala code throws its checked SparkException undeclared.
   */
  static void starting(String master) {
    Thread starter =
        new Thread(
            () -> {
              try {
                SparkPipelineOptions options = PipelineOptionsFactory.as(SparkPipelineOptions.class);
                options.setSparkMaster(master);
                options.setAppName(APP_NAME);
                SparkContextFactory.getSparkContext(options);
                LOG.info("The run's Spark context started with the job server ({})", master);
              } catch (Exception | Error failure) {
                LOG.error(
                    "The run's Spark context did not start with the job server; the first job tries"
                        + " again",
                    failure);
              }
            },
            "tfxd-spark-context-start");
    starter.setDaemon(true);
    starter.start();
  }
}
