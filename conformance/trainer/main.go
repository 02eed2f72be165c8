// trainer judges a ClusterTrainingRuntime and a TrainJob with Kubeflow Trainer v2's own code, and JobSet's,
// in the order a cluster applies them, and prints every pod the resulting JobSet would create.
//
//  1. ClusterTrainingRuntime: the API server with the CRD from the trainer module
//     (manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml), through ../internal/crd:
//     strict decoding (pruning; an unknown field is refused, as `kubectl apply --validate=strict` does), the
//     schema's defaults, then the registry's own strategy (OpenAPI schema, object metadata, list types,
//     x-kubernetes-validations (CEL)); then Trainer's validating webhook
//     (validator.clustertrainingruntime.trainer.kubeflow.org).
//  2. TrainJob: the same API-server steps with trainer.kubeflow.org_trainjobs.yaml, Trainer's mutating webhook
//     (defaulter.trainjob...) and validating webhook (validator.trainjob..., which looks the runtime up
//     through the runtime registry, pkg/runtime/core, backed here by a controller-runtime fake client that
//     holds the ClusterTrainingRuntime).
//  3. Trainer's controller: runtime.NewObjects (pkg/runtime/core + framework plugins) builds the JobSet.
//  4. JobSet: the API-server steps with the JobSet CRD from the jobset module
//     (config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml), JobSet's mutating webhook (mjobset.kb.io)
//     and validating webhook (vjobset.kb.io).
//  5. JobSet's controller (JobSetReconciler.Reconcile against the fake client) creates the child Jobs and
//     the headless Service.
//  6. Each child Job through the Job API's create strategy and validation, then kube-controller-manager's own
//     Job controller (k8s.io/kubernetes pkg/registry/batch/job, pkg/controller/job: jobs.go), whose pods go
//     through JobSet's pod webhooks (mpod.kb.io, vpod.kb.io), with the Priority admission plugin's default
//     (priority 0, assuming no globalDefault PriorityClass). With --failures INDEX, also what the Job
//     controller does when that node's pod fails with each of --exit-codes, and when it fails every time
//     with --repeated (jobs.go).
//
// Usage: trainer [--crds DIR] [--failures INDEX --exit-codes N,N... --repeated N] RUNTIME TRAINJOB (YAML or
// JSON). Prints one JSON object on stdout and exits 0; or prints the refusal on stderr and exits 1. DIR holds the three Trainer CRDs and the JobSet CRD
// (default: crds/ beside this program).
//
// Built by `make conformance` from the versions ../go.mod pins (JobSet v0.12.0: the one Trainer v2.3.0
// requires and deploys); never shipped in tfxd's wheel. tests/conformance/test_trainer.py runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetcontrollers "sigs.k8s.io/jobset/pkg/controllers"

	configapi "github.com/kubeflow/trainer/v2/pkg/apis/config/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	trainerruntime "github.com/kubeflow/trainer/v2/pkg/runtime"
	trainercore "github.com/kubeflow/trainer/v2/pkg/runtime/core"

	"tfxd.dev/conformance/internal/crd"
)

// Placeholders for what the API server would assign on create.
const (
	trainJobUID = "00000000-0000-4000-8000-000000000001"
	jobSetUID   = "00000000-0000-4000-8000-000000000002"
)

func main() {
	crds := flag.String("crds", "", "folder with the Trainer and JobSet CRDs (default: crds/ beside this program)")
	flag.IntVar(&failIndex, "failures", -1, "also judge what the Job API and the Job controller do when this node index's pod fails")
	flag.Func("exit-codes", "with --failures: the exit codes to fail it with, one case each (comma-separated)", parseCodes)
	flag.Func("repeated", "with --failures: the exit code it fails with every time, until the Job fails", func(text string) error {
		code, err := strconv.Atoi(text)
		repeatedCode = int32(code)
		return err
	})
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: trainer [--crds DIR] [--failures INDEX --exit-codes N,N... --repeated N] RUNTIME TRAINJOB")
		os.Exit(2)
	}
	if *crds == "" {
		self, err := os.Executable()
		if err != nil {
			refuse("finding the CRDs: %v", err)
		}
		*crds = filepath.Join(filepath.Dir(self), "crds")
	}
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	out, err := judge(context.Background(), *crds, flag.Arg(0), flag.Arg(1))
	if err != nil {
		refuse("%v", err)
	}
	text, _ := json.MarshalIndent(out, "", "  ")
	fmt.Println(string(text))
}

func refuse(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// ---------------------------------------------------------------------------------------------------------
// output

type Output struct {
	Warnings []string   `json:"warnings,omitempty"`
	JobSet   JobSetInfo `json:"jobSet"`
	Pods     []Pod      `json:"pods"`
	Failures *Failures  `json:"failures,omitempty"`
}

var (
	failIndex    = -1
	exitCodes    []int32
	repeatedCode int32 = 137
)

func parseCodes(text string) error {
	for _, part := range strings.Split(text, ",") {
		code, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		exitCodes = append(exitCodes, int32(code))
	}
	return nil
}

type JobSetInfo struct {
	Name           string          `json:"name"`
	Namespace      string          `json:"namespace"`
	Subdomain      *string         `json:"subdomain"` // nil: enableDNSHostnames false
	Service        *string         `json:"headlessService"`
	ReplicatedJobs []ReplicatedJob `json:"replicatedJobs"`
}

type ReplicatedJob struct {
	Name           string                    `json:"name"`
	Replicas       int32                     `json:"replicas"`
	Parallelism    *int32                    `json:"parallelism"`
	Completions    *int32                    `json:"completions"`
	CompletionMode *string                   `json:"completionMode"`
	Ancestor       string                    `json:"trainjobAncestorStep,omitempty"`
	BackoffLimit   *int32                    `json:"backoffLimit"`
	PerIndex       *int32                    `json:"backoffLimitPerIndex"`
	MaxFailed      *int32                    `json:"maxFailedIndexes"`
	FailurePolicy  *batchv1.PodFailurePolicy `json:"podFailurePolicy"`
	SuccessPolicy  *batchv1.SuccessPolicy    `json:"successPolicy"`
}

type Pod struct {
	ReplicatedJob  string               `json:"replicatedJob"`
	JobIndex       int                  `json:"jobIndex"`
	PodIndex       *int                 `json:"podIndex"` // completion index; nil for a NonIndexed Job
	Job            string               `json:"job"`
	GenerateName   string               `json:"generateName"`
	Hostname       string               `json:"hostname"`
	Subdomain      string               `json:"subdomain"`
	FQDN           string               `json:"fqdn,omitempty"` // hostname.subdomain (add .<namespace>.svc.<cluster-domain>)
	Labels         map[string]string    `json:"labels"`
	Annotations    map[string]string    `json:"annotations"`
	ServiceAccount string               `json:"serviceAccountName"`
	NodeSelector   map[string]string    `json:"nodeSelector,omitempty"`
	Tolerations    []corev1.Toleration  `json:"tolerations,omitempty"`
	RestartPolicy  corev1.RestartPolicy `json:"restartPolicy"`
	Grace          *int64               `json:"terminationGracePeriodSeconds"`
	InitContainers []Container          `json:"initContainers,omitempty"`
	Containers     []Container          `json:"containers"`
}

type Container struct {
	Name      string                      `json:"name"`
	Image     string                      `json:"image"`
	Command   []string                    `json:"command"`
	Args      []string                    `json:"args"`
	Env       []Env                       `json:"env"`
	EnvFrom   []corev1.EnvFromSource      `json:"envFrom,omitempty"`
	Ports     []corev1.ContainerPort      `json:"ports,omitempty"`
	Resources corev1.ResourceRequirements `json:"resources"`
}

type Env struct {
	Name      string               `json:"name"`
	Value     *string              `json:"value,omitempty"`
	ValueFrom *corev1.EnvVarSource `json:"valueFrom,omitempty"`
	// Resolved is the value the kubelet would give a downward-API fieldRef on this pod's metadata (nil when
	// it cannot be known here, e.g. metadata.name, status.podIP, or a secret).
	Resolved *string `json:"resolved,omitempty"`
}

// ---------------------------------------------------------------------------------------------------------

func judge(ctx context.Context, crdDir, runtimePath, trainJobPath string) (*Output, error) {
	out := &Output{Pods: []Pod{}}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme, jobsetv1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}

	ctrSchema, err := crd.Load(filepath.Join(crdDir, "trainer.kubeflow.org_clustertrainingruntimes.yaml"), "v1alpha1")
	if err != nil {
		return nil, err
	}
	tjSchema, err := crd.Load(filepath.Join(crdDir, "trainer.kubeflow.org_trainjobs.yaml"), "v1alpha1")
	if err != nil {
		return nil, err
	}
	jsSchema, err := crd.Load(filepath.Join(crdDir, "jobset.x-k8s.io_jobsets.yaml"), "v1alpha2")
	if err != nil {
		return nil, err
	}

	// --- ClusterTrainingRuntime --------------------------------------------------------------------------
	ctrObj, err := readObject(runtimePath, trainer.GroupVersion.String(), trainer.ClusterTrainingRuntimeKind)
	if err != nil {
		return nil, err
	}
	hooks, err := newWebhooks(scheme, nil)
	if err != nil {
		return nil, err
	}
	ctrObj, warnings, err := hooks.create(ctx, ctrSchema, ctrObj, "", "clustertrainingruntimes", nil,
		[]hook{{"/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime", "validator.clustertrainingruntime.trainer.kubeflow.org"}})
	out.Warnings = append(out.Warnings, warnings...)
	if err != nil {
		return nil, err
	}
	ctr := &trainer.ClusterTrainingRuntime{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ctrObj, ctr); err != nil {
		return nil, err
	}
	ctr.UID = "00000000-0000-4000-8000-000000000000"

	// --- the fake cluster: a controller-runtime fake client holding the runtime, with the field indexes
	// Trainer's runtime registry and JobSet's controller register.
	builder := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(ctr).
		WithStatusSubresource(&trainer.TrainJob{}, &jobsetv1alpha2.JobSet{}, &batchv1.Job{})
	recorder := indexRecorder{builder}
	cfg := &configapi.Configuration{}
	configapi.SetDefaults_Configuration(cfg)
	// first pass only to record the indexes trainer asks for; the runtimes are built again below on the
	// client that carries them.
	if _, err := trainercore.New(ctx, fake.NewClientBuilder().WithScheme(scheme).Build(), recorder, cfg); err != nil {
		return nil, fmt.Errorf("initializing Trainer's runtimes: %w", err)
	}
	if err := jobsetcontrollers.SetupJobSetIndexes(ctx, recorder); err != nil {
		return nil, fmt.Errorf("JobSet indexes: %w", err)
	}
	cl := builder.Build()
	runtimes, err := trainercore.New(ctx, cl, noIndexer{}, cfg)
	if err != nil {
		return nil, fmt.Errorf("initializing Trainer's runtimes: %w", err)
	}
	hooks, err = newWebhooksFor(scheme, cl, runtimes)
	if err != nil {
		return nil, err
	}

	// --- TrainJob -------------------------------------------------------------------------------------------
	tjObj, err := readObject(trainJobPath, trainer.GroupVersion.String(), trainer.TrainJobKind)
	if err != nil {
		return nil, err
	}
	meta := tjObj["metadata"].(map[string]interface{})
	if ns, _ := meta["namespace"].(string); ns == "" {
		meta["namespace"] = "default"
	}
	tjObj, warnings, err = hooks.create(ctx, tjSchema, tjObj, meta["namespace"].(string), "trainjobs",
		[]hook{{"/mutate-trainer-kubeflow-org-v1alpha1-trainjob", "defaulter.trainjob.trainer.kubeflow.org"}},
		[]hook{{"/validate-trainer-kubeflow-org-v1alpha1-trainjob", "validator.trainjob.trainer.kubeflow.org"}})
	out.Warnings = append(out.Warnings, warnings...)
	if err != nil {
		return nil, err
	}
	trainJob := &trainer.TrainJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tjObj, trainJob); err != nil {
		return nil, err
	}
	trainJob.UID = trainJobUID
	if err := cl.Create(ctx, trainJob.DeepCopy()); err != nil {
		return nil, err
	}

	// --- Trainer's controller: TrainJobReconciler.reconcileObjects ----------------------------------------
	rt, ok := runtimes[trainerruntime.RuntimeRefToRuntimeRegistryKey(trainJob.Spec.RuntimeRef)]
	if !ok {
		return nil, fmt.Errorf("unsupported runtime: %s", trainerruntime.RuntimeRefToRuntimeRegistryKey(trainJob.Spec.RuntimeRef))
	}
	objects, err := rt.NewObjects(ctx, trainJob)
	if err != nil {
		return nil, fmt.Errorf("TrainJob resources reconciliation failed: %w", err)
	}
	var jsObj map[string]interface{}
	for _, o := range objects {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		u := map[string]interface{}{}
		if err := json.Unmarshal(raw, &u); err != nil {
			return nil, err
		}
		if u["kind"] == "JobSet" {
			jsObj = u
		}
	}
	if jsObj == nil {
		return nil, fmt.Errorf("Trainer built no JobSet for this TrainJob")
	}

	// --- the JobSet through the API server and JobSet's webhooks -------------------------------------------
	jsObj, warnings, err = hooks.create(ctx, jsSchema, jsObj, trainJob.Namespace, "jobsets",
		[]hook{{"/mutate-jobset-x-k8s-io-v1alpha2-jobset", "mjobset.kb.io"}},
		[]hook{{"/validate-jobset-x-k8s-io-v1alpha2-jobset", "vjobset.kb.io"}})
	out.Warnings = append(out.Warnings, warnings...)
	if err != nil {
		return nil, fmt.Errorf("applying the JobSet Trainer built: %w", err)
	}
	js := &jobsetv1alpha2.JobSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(jsObj, js); err != nil {
		return nil, err
	}
	js.UID = jobSetUID
	if err := cl.Create(ctx, js); err != nil {
		return nil, err
	}

	// --- JobSet's controller --------------------------------------------------------------------------------
	reconciler := jobsetcontrollers.NewJobSetReconciler(cl, scheme, events.NewFakeRecorder(1000))
	if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: js.Namespace, Name: js.Name}}); err != nil {
		return nil, fmt.Errorf("JobSet controller: %w", err)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(js), js); err != nil {
		return nil, err
	}
	out.JobSet = JobSetInfo{Name: js.Name, Namespace: js.Namespace}
	if js.Spec.Network != nil && ptr.Deref(js.Spec.Network.EnableDNSHostnames, false) {
		sub := jobsetcontrollers.GetSubdomain(js)
		out.JobSet.Subdomain = &sub
		svc := &corev1.Service{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: js.Namespace, Name: sub}, svc); err == nil {
			out.JobSet.Service = &svc.Name
		}
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		r := ReplicatedJob{Name: rj.Name, Replicas: rj.Replicas, Parallelism: rj.Template.Spec.Parallelism,
			Completions: rj.Template.Spec.Completions, Ancestor: rj.Template.Labels["trainer.kubeflow.org/trainjob-ancestor-step"],
			BackoffLimit: rj.Template.Spec.BackoffLimit, PerIndex: rj.Template.Spec.BackoffLimitPerIndex,
			MaxFailed: rj.Template.Spec.MaxFailedIndexes, FailurePolicy: rj.Template.Spec.PodFailurePolicy,
			SuccessPolicy: rj.Template.Spec.SuccessPolicy}
		if rj.Template.Spec.CompletionMode != nil {
			r.CompletionMode = ptr.To(string(*rj.Template.Spec.CompletionMode))
		}
		out.JobSet.ReplicatedJobs = append(out.JobSet.ReplicatedJobs, r)
	}

	jobs := &batchv1.JobList{}
	if err := cl.List(ctx, jobs, client.InNamespace(js.Namespace)); err != nil {
		return nil, err
	}
	order := map[string]int{}
	for i, rj := range js.Spec.ReplicatedJobs {
		order[rj.Name] = i
	}
	sort.Slice(jobs.Items, func(a, b int) bool {
		ja, jb := jobs.Items[a], jobs.Items[b]
		ra, rb := order[ja.Labels[jobsetv1alpha2.ReplicatedJobNameKey]], order[jb.Labels[jobsetv1alpha2.ReplicatedJobNameKey]]
		if ra != rb {
			return ra < rb
		}
		ia, _ := strconv.Atoi(ja.Labels[jobsetv1alpha2.JobIndexKey])
		ib, _ := strconv.Atoi(jb.Labels[jobsetv1alpha2.JobIndexKey])
		return ia < ib
	})

	// --- the Job controller, then JobSet's pod webhooks -----------------------------------------------------
	for i := range jobs.Items {
		job := &jobs.Items[i]
		jobIndex, _ := strconv.Atoi(job.Labels[jobsetv1alpha2.JobIndexKey])
		pods, err := controllerPods(ctx, job)
		if err != nil {
			return nil, err
		}
		for _, pod := range pods {
			// the Priority admission plugin, before mutating webhooks (no priorityClassName, no globalDefault)
			if pod.Spec.Priority == nil && pod.Spec.PriorityClassName == "" {
				pod.Spec.Priority = ptr.To[int32](0)
			}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
			if err != nil {
				return nil, err
			}
			podObj, warnings, err := hooks.admit(ctx, raw, job.Namespace, schemaGVR{"", "v1", "pods"}, "Pod",
				[]hook{{"/mutate--v1-pod", "mpod.kb.io"}}, []hook{{"/validate--v1-pod", "vpod.kb.io"}})
			out.Warnings = append(out.Warnings, warnings...)
			if err != nil {
				return nil, fmt.Errorf("creating pod of Job %s: %w", job.Name, err)
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(podObj, pod); err != nil {
				return nil, err
			}
			out.Pods = append(out.Pods, describePod(pod, job, jobIndex))
		}
	}
	if failIndex >= 0 && len(jobs.Items) > 0 {
		if out.Failures, err = judgeFailures(ctx, &jobs.Items[0], failIndex, exitCodes, repeatedCode); err != nil {
			return nil, err
		}
	}
	return out, nil
}
