// training-operator judges a TFJob manifest with the Kubeflow Training Operator's own code (v1.9, the line
// that serves kubeflow.org/v1 TFJob), in the order a cluster applies it to a new TFJob:
//
//  1. the API server with the TFJob CRD from the operator's module (manifests/base/crds/kubeflow.org_tfjobs.yaml),
//     through ../internal/crd: strict decoding (pruning; an unknown field is refused, as
//     `kubectl apply --validate=strict` does), the schema's defaults, then the registry's own strategy
//     (metadata, the OpenAPI schema, embedded objects, list types, CEL rules);
//  2. the operator's validating webhook (pkg/webhooks/tensorflow, ValidateCreate);
//  3. the controller's defaults (SetDefaults_TFJob) and the TF_CONFIG it writes into each replica's
//     `tensorflow` container (TFJobReconciler.SetClusterSpec).
//
// With --restarts it prints instead, for each replica type of the accepted job, the restartPolicy the
// controller puts on its pods (core.SetRestartPolicy) and which of the exit codes 0, 1, 2, 126, 127, 128,
// 130, 137 and 143 the operator counts as retryable (pkg/util/train, IsRetryableExitCode), the two facts
// ReconcilePods decides a failed pod's recreation by (pkg/controller.v1/common/pod.go).
//
// Usage: training-operator [--crd FILE] [--restarts] MANIFEST (YAML or JSON). Prints one JSON object on stdout,
// {"<type>-<index>": "<TF_CONFIG, the env var's value as written>" or null where the controller writes none},
// and exits 0; or prints the refusal on stderr and exits 1. The controller reads CUSTOM_CLUSTER_DOMAIN from
// its own environment, so this program does too.
//
// Built by `make conformance` from the versions ../go.mod pins; never shipped in tfxd's wheel.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	tfctrl "github.com/kubeflow/training-operator/pkg/controller.v1/tensorflow"
	"github.com/kubeflow/training-operator/pkg/core"
	trainutil "github.com/kubeflow/training-operator/pkg/util/train"
	tfwebhook "github.com/kubeflow/training-operator/pkg/webhooks/tensorflow"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"tfxd.dev/conformance/internal/crd"
)

func main() {
	crd := flag.String("crd", "", "the TFJob CRD (default: kubeflow.org_tfjobs.yaml beside this program)")
	restarts := flag.Bool("restarts", false, "print each replica type's pod restartPolicy and retryable exit codes")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: training-operator [--crd FILE] MANIFEST")
		os.Exit(2)
	}
	if *crd == "" {
		self, err := os.Executable()
		if err != nil {
			refuse("finding the CRD: %v", err)
		}
		*crd = filepath.Join(filepath.Dir(self), "kubeflow.org_tfjobs.yaml")
	}
	job, configs, err := judge(*crd, flag.Arg(0))
	if err != nil {
		refuse("%v", err)
	}
	var answer any = configs
	if *restarts {
		answer = restartsOf(job)
	}
	out, _ := json.MarshalIndent(answer, "", "  ")
	fmt.Println(string(out))
}

func refuse(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// restartsOf is, for each replica type, the pod restartPolicy the controller writes and the exit codes it
// takes as retryable.
func restartsOf(job *kubeflowv1.TFJob) map[string]map[string]any {
	answer := map[string]map[string]any{}
	for rtype, spec := range job.Spec.TFReplicaSpecs {
		template := spec.Template.DeepCopy()
		core.SetRestartPolicy(template, spec)
		retryable := []int32{}
		for _, code := range []int32{0, 1, 2, 126, 127, 128, 130, 137, 143} {
			if trainutil.IsRetryableExitCode(code) {
				retryable = append(retryable, code)
			}
		}
		answer[string(rtype)] = map[string]any{"restartPolicy": string(spec.RestartPolicy),
			"podRestartPolicy": string(template.Spec.RestartPolicy), "retryableExitCodes": retryable}
	}
	return answer
}

func judge(crdPath, manifestPath string) (*kubeflowv1.TFJob, map[string]*string, error) {
	resource, err := crd.Load(crdPath, "v1")
	if err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		return nil, nil, err
	}
	object := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &object); err != nil {
		return nil, nil, fmt.Errorf("%s is not YAML or JSON: %w", manifestPath, err)
	}
	if object["apiVersion"] != "kubeflow.org/v1" || object["kind"] != "TFJob" {
		return nil, nil, fmt.Errorf("not a kubeflow.org/v1 TFJob: apiVersion %v, kind %v", object["apiVersion"], object["kind"])
	}
	// the API server: strict decoding (pruning, then defaults), then the registry's validation
	if err := resource.Decode(object); err != nil {
		return nil, nil, err
	}
	if err := resource.Validate(context.Background(), object); err != nil {
		return nil, nil, err
	}
	job := &kubeflowv1.TFJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(object, job); err != nil {
		return nil, nil, err
	}
	// the operator's admission webhook
	ctrl.SetLogger(logr.Discard())
	if _, err := (&tfwebhook.Webhook{}).ValidateCreate(context.Background(), job); err != nil {
		return nil, nil, fmt.Errorf("admission webhook \"validator.tfjob.training-operator.kubeflow.org\" denied the request: %w", err)
	}
	// the controller: its defaults, then TF_CONFIG for each replica as it creates the pods
	kubeflowv1.SetDefaults_TFJob(job)
	configs := map[string]*string{}
	for rtype, spec := range job.Spec.TFReplicaSpecs {
		for index := 0; index < int(*spec.Replicas); index++ {
			template := spec.Template.DeepCopy()
			kind := strings.ToLower(string(rtype))
			if err := (&tfctrl.TFJobReconciler{}).SetClusterSpec(job, template, kind, strconv.Itoa(index)); err != nil {
				return nil, nil, fmt.Errorf("%s %d: %w", kind, index, err)
			}
			configs[fmt.Sprintf("%s-%d", kind, index)] = tfConfig(template)
		}
	}
	return job, configs, nil
}

// tfConfig is the TF_CONFIG the controller put on the `tensorflow` container (nil when it put none: a job of
// one replica is not distributed).
func tfConfig(template *corev1.PodTemplateSpec) *string {
	for _, container := range template.Spec.Containers {
		if container.Name != kubeflowv1.TFJobDefaultContainerName {
			continue
		}
		for _, env := range container.Env {
			if env.Name == "TF_CONFIG" {
				value := env.Value
				return &value
			}
		}
	}
	return nil
}
