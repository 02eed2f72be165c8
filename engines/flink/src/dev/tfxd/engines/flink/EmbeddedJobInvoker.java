package dev.tfxd.engines.flink;

import java.util.Collections;
import org.apache.beam.model.pipeline.v1.RunnerApi;
import org.apache.beam.runners.flink.FlinkJobInvoker;
import org.apache.beam.runners.flink.FlinkJobServerDriver.FlinkServerConfiguration;
import org.apache.beam.runners.jobsubmission.JobInvocation;
import org.apache.beam.sdk.util.construction.resources.PipelineResourcesDetector;
import org.apache.beam.vendor.grpc.v1p60p1.com.google.protobuf.Struct;
import org.apache.beam.vendor.grpc.v1p60p1.com.google.protobuf.Value;
import org.apache.beam.vendor.guava.v32_1_2_jre.com.google.common.util.concurrent.ListeningExecutorService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Beam's Flink job invoker for the jobs of the embedded cluster, which runs on this JVM's class
 * path: no jars to stage, so the class path is not scanned for them.
 *
 * <p>Beam's invoker asks every job's PipelineResourcesDetector for the files to stage, by default a
 * ClassGraph scan of every jar on the class path (0.1-0.4 s of a job, in the JVM that runs the
 * jobs), and hands them to the job's execution environment, which uses them only for a remote
 * master (FlinkExecutionEnvironments): the {@code [auto]} master takes the context environment
 * SessionJobServer installs. Each job here names NothingToStage as its detector factory, in the
 * options it was submitted with (the option the detector's default reads,
 * PipelineResourcesOptions.pipelineResourcesDetectorFactoryClass; Beam's Python runner submitting to
 * a job endpoint sends no option it does not know, so no job names one of its own).
 */
final class EmbeddedJobInvoker extends FlinkJobInvoker {
  static final String DETECTOR_FACTORY_OPTION =
      "beam:option:pipeline_resources_detector_factory_class:v1";
  private static final Logger LOG = LoggerFactory.getLogger(EmbeddedJobInvoker.class);

  EmbeddedJobInvoker(FlinkServerConfiguration configuration) {
    super(configuration);
  }

  @Override
  protected JobInvocation invokeWithExecutor(
      RunnerApi.Pipeline pipeline,
      Struct options,
      String retrievalToken,
      ListeningExecutorService executorService) {
    Value factory = Value.newBuilder().setStringValue(NothingToStage.class.getName()).build();
    Struct submitted = options.toBuilder().putFields(DETECTOR_FACTORY_OPTION, factory).build();
    LOG.info("A job on the embedded cluster: no jars staged (the class path is not scanned)");
    return super.invokeWithExecutor(pipeline, submitted, retrievalToken, executorService);
  }

  /** Detects no files to stage (Beam builds a detector factory by its static {@code create}). */
  public static final class NothingToStage implements PipelineResourcesDetector.Factory {
    public static NothingToStage create() {
      return new NothingToStage();
    }

    @Override
    public PipelineResourcesDetector getPipelineResourcesDetector() {
      return classLoader -> Collections.emptyList();
    }
  }
}
