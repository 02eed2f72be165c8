package dev.tfxd.engines.flink;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.stream.Stream;
import org.apache.beam.runners.flink.FlinkJobServerDriver;
import org.apache.beam.runners.flink.FlinkJobServerDriver.FlinkServerConfiguration;
import org.apache.beam.sdk.io.FileSystems;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.flink.api.dag.Pipeline;
import org.apache.flink.api.java.ExecutionEnvironment;
import org.apache.flink.client.deployment.executors.PipelineExecutorUtils;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.PipelineExecutor;
import org.apache.flink.core.execution.PipelineExecutorFactory;
import org.apache.flink.core.execution.PipelineExecutorServiceLoader;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.minicluster.MiniClusterJobClient;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Beam's Flink job server with one embedded Flink cluster for all the jobs it runs.
 *
 * <p>With {@code --flink-master=[local]} Beam's job server starts a Flink mini cluster for every job
 * and shuts it down after (about a second each, a TFX component being a job). Here the master
 * {@code [local]} starts one mini cluster, with {@code tfxd.flink.slots} task slots, beside the job
 * server, and makes it the context environment that Beam's {@code [auto]} master takes
 * (FlinkExecutionEnvironments): every batch job is submitted to that cluster in this JVM, as Flink's
 * own test environment does, with no jars staged (the cluster runs on this class path), nor looked
 * for (EmbeddedJobInvoker). Any other master is handed to Beam's job server as it is.
 */
public final class SessionJobServer {
  static final String MASTER_FLAG = "--flink-master=";
  static final String EMBEDDED = "[local]";
  static final String SLOTS_PROPERTY = "tfxd.flink.slots";
  static final String EXECUTOR = "tfxd-session-cluster";
  private static final Logger LOG = LoggerFactory.getLogger(SessionJobServer.class);

  private SessionJobServer() {}

  public static void main(String[] args) throws Exception {
    List<String> forwarded = new ArrayList<>();
    boolean embedded = false;
    for (String arg : args) {
      if (arg.equals(MASTER_FLAG + EMBEDDED)) {
        embedded = true;
        forwarded.add(MASTER_FLAG + "[auto]");
      } else {
        forwarded.add(arg);
      }
    }
    if (!embedded) {
      FlinkJobServerDriver.main(forwarded.toArray(new String[0]));
      return;
    }
    int slots = Integer.getInteger(SLOTS_PROPERTY, 1);
    SessionEnvironment.install(starting(slots), slots);
    // as Beam's main, with the embedded cluster's job invoker: the job server's own file systems
    // (its artifact staging) from default options
    FileSystems.setDefaultPipelineOptions(PipelineOptionsFactory.create());
    FlinkServerConfiguration configuration =
        FlinkJobServerDriver.parseArgs(forwarded.toArray(new String[0]));
    FlinkJobServerDriver.fromConfig(configuration, () -> new EmbeddedJobInvoker(configuration))
        .run();
  }

  /**
   * The cluster, starting while the job server starts (the first job waits for it); a cluster that
   * cannot start fails every job, with why, and says so in the log at once.
   */
  static CompletableFuture<MiniCluster> starting(int slots) {
    CompletableFuture<MiniCluster> cluster = new CompletableFuture<>();
    Thread starter =
        new Thread(
            () -> {
              try {
                cluster.complete(started(slots));
              } catch (Exception | Error failure) {
                LOG.error("The embedded Flink cluster did not start", failure);
                cluster.completeExceptionally(failure);
              }
            },
            "tfxd-flink-cluster-start");
    starter.setDaemon(true);
    starter.start();
    return cluster;
  }

  /** The cluster, sized as Beam sizes its per-job one (managed memory a fraction of the free heap). */
  static MiniCluster started(int slots) throws Exception {
    Configuration configuration = new Configuration();
    long managed =
        (long) (configuration.get(TaskManagerOptions.MANAGED_MEMORY_FRACTION)
            * EnvironmentInformation.getSizeOfFreeHeapMemoryWithDefrag());
    configuration.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, new MemorySize(managed));
    configuration.setString("classloader.check-leaked-classloader", "false");
    configuration.set(RestOptions.ADDRESS, "127.0.0.1");
    configuration.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
    configuration.set(RestOptions.BIND_PORT, "0");
    MiniCluster cluster =
        new MiniCluster(
            new MiniClusterConfiguration.Builder()
                .setConfiguration(configuration)
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(slots)
                .build());
    cluster.start();
    return cluster;
  }

  /**
   * The context environment of every batch job: submitted to the one cluster, waited for. Beam's
   * Flink runner translates a batch pipeline to Flink's DataSet API, which Flink marks deprecated.
   */
  @SuppressWarnings("deprecation")
  static final class SessionEnvironment extends ExecutionEnvironment {
    SessionEnvironment(PipelineExecutorServiceLoader executors, Configuration configuration) {
      super(executors, configuration, SessionJobServer.class.getClassLoader());
    }

    static void install(CompletableFuture<MiniCluster> cluster, int slots) {
      PipelineExecutor executor = new ClusterExecutor(cluster, slots);
      PipelineExecutorFactory factory =
          new PipelineExecutorFactory() {
            @Override
            public String getName() {
              return EXECUTOR;
            }

            @Override
            public boolean isCompatibleWith(Configuration configuration) {
              return EXECUTOR.equals(configuration.get(DeploymentOptions.TARGET));
            }

            @Override
            public PipelineExecutor getExecutor(Configuration configuration) {
              return executor;
            }
          };
      PipelineExecutorServiceLoader executors =
          new PipelineExecutorServiceLoader() {
            @Override
            public PipelineExecutorFactory getExecutorFactory(Configuration configuration) {
              return factory;
            }

            @Override
            public Stream<String> getExecutorNames() {
              return Stream.of(EXECUTOR);
            }
          };
      initializeContextEnvironment(
          () -> {
            Configuration configuration = new Configuration();
            configuration.set(DeploymentOptions.TARGET, EXECUTOR);
            configuration.set(DeploymentOptions.ATTACHED, true);
            return new SessionEnvironment(executors, configuration);
          });
    }
  }

  /**
   * Submits a job's graph to the cluster; the cluster outlives the job. A job cancelled while its
   * tasks wait for an SDK worker that died before it connected keeps its slots (the tasks never
   * finish, until Flink's task cancellation timeout ends their TaskManager): where a job's slots are
   * not free within a short wait, which a job that just ended takes to free its own, the cluster
   * gets another TaskManager, as a Flink cluster's resource manager would start one.
   */
  static final class ClusterExecutor implements PipelineExecutor {
    private static final long SLOTS_WAIT_MILLIS = 2000;
    private final CompletableFuture<MiniCluster> starting;
    private final int slotsPerTaskManager;

    ClusterExecutor(CompletableFuture<MiniCluster> starting, int slotsPerTaskManager) {
      this.starting = starting;
      this.slotsPerTaskManager = slotsPerTaskManager;
    }

    @Override
    public CompletableFuture<JobClient> execute(
        Pipeline pipeline, Configuration configuration, ClassLoader classLoader) throws Exception {
      MiniCluster cluster;
      try {
        cluster = starting.get();
      } catch (ExecutionException failed) {
        throw new IllegalStateException("The embedded Flink cluster did not start", failed.getCause());
      }
      JobGraph graph = PipelineExecutorUtils.getJobGraph(pipeline, configuration, classLoader);
      slotsFor(cluster, graph.getMaximumParallelism());
      return cluster
          .submitJob(graph)
          .thenApply(
              submitted ->
                  new MiniClusterJobClient(
                      submitted.getJobID(),
                      cluster,
                      classLoader,
                      MiniClusterJobClient.JobFinalizationBehavior.NOTHING));
    }

    private void slotsFor(MiniCluster cluster, int parallelism) throws Exception {
      long deadline = System.currentTimeMillis() + SLOTS_WAIT_MILLIS;
      int free;
      while ((free = cluster.requestClusterOverview().get().getNumSlotsAvailable()) < parallelism) {
        if (System.currentTimeMillis() > deadline) {
          int more = (parallelism - free + slotsPerTaskManager - 1) / slotsPerTaskManager;
          LOG.warn(
              "{} of the {} slots a job needs are free (a cancelled job's tasks hold the rest): "
                  + "starting {} more TaskManager(s)",
              free,
              parallelism,
              more);
          for (int added = 0; added < more; added++) {
            cluster.startTaskManager();
          }
          return;
        }
        Thread.sleep(50);
      }
    }
  }
}
