// What Kubernetes makes of a child Job of the JobSet: the Job API's own create strategy and validation
// (k8s.io/kubernetes pkg/registry/batch/job: defaults, the generated selector, ValidateJob, which holds
// podFailurePolicy, backoffLimitPerIndex, maxFailedIndexes and successPolicy to each other), then
// kube-controller-manager's own Job controller (pkg/controller/job) running against a fake clientset: the
// pods it creates, and, with --failures, what it does when a node's pod fails: a fresh Job per case, one
// pod marked failed with an exit code as the kubelet reports it, and what the controller does next (a new
// pod for the index, with its job-index-failure-count annotation, or the Job failed, with its reason).
package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/batch"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	jobcontroller "k8s.io/kubernetes/pkg/controller/job"
	jobstrategy "k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/utils/ptr"
)

// Failures is what the Job controller did with each failed pod: one case per exit code given, each a fresh
// Job whose pod of index failed once; then Repeated: the same index failing with RepeatedCode every
// time, until the Job fails.
type Failures struct {
	Job          string          `json:"job"`
	Index        int             `json:"index"`
	BackoffSecs  float64         `json:"podFailureBackoffSeconds"` // the controller's first wait for a new pod
	ByExitCode   map[string]Fate `json:"byExitCode"`
	RepeatedCode int32           `json:"repeatedExitCode"`
	Repeated     Fate            `json:"repeated"`
}

// Fate of a failed index: the pods the controller created for it again (each with its failure count), or
// the Job's Failed condition.
type Fate struct {
	FailureCounts []string `json:"newPodsFailureCounts"`
	FailedReason  string   `json:"jobFailedReason,omitempty"`
	FailedMessage string   `json:"jobFailedMessage,omitempty"`
}

// judgeFailures runs the Job API's create path on job (a child Job JobSet's controller made), then
// each case through the Job controller.
func judgeFailures(ctx context.Context, job *batchv1.Job, index int, codes []int32, repeated int32) (*Failures, error) {
	created, err := jobAPICreate(ctx, job)
	if err != nil {
		return nil, err
	}
	out := &Failures{Job: job.Name, Index: index, BackoffSecs: jobcontroller.DefaultJobPodFailureBackOff.Seconds(),
		ByExitCode: map[string]Fate{}, RepeatedCode: repeated}
	// the controller's wait before a failed index's new pod, shortened here so that a case takes
	// milliseconds; its real value is reported above
	jobcontroller.DefaultJobPodFailureBackOff = 20 * time.Millisecond
	jobcontroller.DefaultJobApiBackOff = 20 * time.Millisecond // its retry after a conflict, likewise
	// every case has its own clientset and controller: they run side by side (the controller batches a
	// Job's pod updates for a second)
	fates, errs := make([]*Fate, len(codes)+1), make([]error, len(codes)+1)
	var group sync.WaitGroup
	for i := range fates {
		group.Add(1)
		go func() {
			defer group.Done()
			if i < len(codes) {
				fates[i], errs[i] = runFailures(ctx, created, index, codes[i], 1)
			} else {
				fates[i], errs[i] = runFailures(ctx, created, index, repeated, 100)
			}
		}()
	}
	group.Wait()
	for i, code := range append(codes, repeated) {
		if errs[i] != nil {
			return nil, fmt.Errorf("exit code %d: %w", code, errs[i])
		}
		if i < len(codes) {
			out.ByExitCode[strconv.Itoa(int(code))] = *fates[i]
		}
	}
	out.Repeated = *fates[len(codes)]
	return out, nil
}

// jobAPICreate: the API server's defaults for batch/v1, the Job strategy's PrepareForCreate (selector and
// labels) and Validate, and the object back in batch/v1 as the controller reads it.
func jobAPICreate(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	external := job.DeepCopy()
	external.UID = types.UID("job-uid-" + job.Name) // rest.BeforeCreate's FillObjectMetaSystemFields
	external.CreationTimestamp = metav1.Now()
	legacyscheme.Scheme.Default(external)
	internal := &batch.Job{}
	if err := legacyscheme.Scheme.Convert(external, internal, nil); err != nil {
		return nil, err
	}
	ctx = genericapirequest.WithNamespace(ctx, job.Namespace)
	jobstrategy.Strategy.PrepareForCreate(ctx, internal)
	if errs := jobstrategy.Strategy.Validate(ctx, internal); len(errs) > 0 {
		return nil, fmt.Errorf("the Job API refuses Job %s: %v", job.Name, errs.ToAggregate())
	}
	back := &batchv1.Job{}
	if err := legacyscheme.Scheme.Convert(internal, back, nil); err != nil {
		return nil, err
	}
	back.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	return back, nil
}

// started: a fake clientset holding job (as the Job API stored it) and the Job controller on it, which
// creates the Job's pods there (the API server's generateName done by a reactor); it runs until ctx ends.
func started(ctx context.Context, job *batchv1.Job) (*kubefake.Clientset, error) {
	clients := kubefake.NewClientset(job.DeepCopy())
	var serial atomic.Int64
	clients.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pod := action.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		if pod.Name == "" {
			pod.Name = pod.GenerateName + strconv.FormatInt(serial.Add(1), 36)
		}
		pod.UID = types.UID("pod-uid-" + pod.Name)
		return false, nil, nil // the tracker stores it
	})
	factory := informers.NewSharedInformerFactory(clients, 0)
	controller, err := jobcontroller.NewController(ctx, clients, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), nil, nil)
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	go controller.Run(ctx, 1)
	return clients, nil
}

// controllerPods: the pods the Job controller creates for a new job, by completion index.
func controllerPods(parent context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	created, err := jobAPICreate(parent, job)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	clients, err := started(ctx, created)
	if err != nil {
		return nil, err
	}
	want := int(ptr.Deref(created.Spec.Completions, ptr.Deref(created.Spec.Parallelism, 1)))
	for {
		list, err := clients.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		if len(list.Items) >= want {
			pods := make([]*corev1.Pod, len(list.Items))
			for i := range list.Items {
				pods[i] = &list.Items[i]
			}
			sort.Slice(pods, func(a, b int) bool {
				ia, _ := strconv.Atoi(pods[a].Annotations[batchv1.JobCompletionIndexAnnotation])
				ib, _ := strconv.Atoi(pods[b].Annotations[batchv1.JobCompletionIndexAnnotation])
				return ia < ib
			})
			return pods, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the Job controller made %d of the %d pods of Job %s", len(list.Items), want, job.Name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runFailures: a fresh Job and controller; the index's pod fails with code up to times times (each
// new pod the controller makes for the index fails again), until the Job fails or times is reached.
func runFailures(parent context.Context, job *batchv1.Job, index int, code int32, times int) (*Fate, error) {
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	defer cancel()
	clients, err := started(ctx, job)
	if err != nil {
		return nil, err
	}
	fate := &Fate{FailureCounts: []string{}}
	failed := map[string]bool{}
	for len(failed) < times {
		pod, current, err := waitFor(ctx, clients, job, index, failed)
		if err != nil {
			return nil, err
		}
		if current != nil { // the Job ended
			fate.FailedReason, fate.FailedMessage = current.Reason, current.Message
			return fate, nil
		}
		if len(failed) > 0 {
			fate.FailureCounts = append(fate.FailureCounts, pod.Annotations[batchv1.JobIndexFailureCountAnnotation])
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: pod.Spec.Containers[0].Name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: "Error", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}}
		if _, err := clients.CoreV1().Pods(job.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		failed[pod.Name] = true
	}
	// the last failure's outcome: a new pod or the Job's end
	pod, current, err := waitFor(ctx, clients, job, index, failed)
	if err != nil {
		return nil, err
	}
	if current != nil {
		fate.FailedReason, fate.FailedMessage = current.Reason, current.Message
	} else {
		fate.FailureCounts = append(fate.FailureCounts, pod.Annotations[batchv1.JobIndexFailureCountAnnotation])
	}
	return fate, nil
}

// waitFor polls until the Job has a Failed (or Complete) condition, or a pod of index not in seen.
func waitFor(ctx context.Context, clients *kubefake.Clientset, job *batchv1.Job, index int, seen map[string]bool) (*corev1.Pod, *batchv1.JobCondition, error) {
	for {
		current, err := clients.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		for i := range current.Status.Conditions {
			c := current.Status.Conditions[i]
			if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobComplete) && c.Status == corev1.ConditionTrue {
				return nil, &c, nil
			}
		}
		pods, err := clients.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Labels[batchv1.JobCompletionIndexAnnotation] == strconv.Itoa(index) && !seen[pod.Name] &&
				pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodFailed {
				return pod, nil, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("the Job controller neither made a new pod for index %d nor ended the Job", index)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
