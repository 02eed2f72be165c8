// The pods a Job makes, and what the judge prints of each.
package main

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// podsForJob copies what kube-controller-manager's Job controller does to the pod template of a Job
// (k8s.io/kubernetes pkg/controller/job/job_controller.go manageJob and indexed_job_utils.go), after the
// Job API's create strategy added its selector labels (pkg/registry/batch/job/strategy.go generateSelector).
func podsForJob(job *batchv1.Job) []*corev1.Pod {
	jobUID := "job-uid-" + job.Name // placeholder for the Job's UID
	template := job.Spec.Template.DeepCopy()
	if template.Labels == nil {
		template.Labels = map[string]string{}
	}
	template.Labels[batchv1.ControllerUidLabel] = jobUID
	template.Labels[batchv1.JobNameLabel] = job.Name
	template.Labels["controller-uid"] = jobUID
	template.Labels["job-name"] = job.Name
	indexed := job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
	if indexed {
		// addCompletionIndexEnvVariables, with PodIndexLabel (GA in Kubernetes 1.32): the env var reads the label
		for _, list := range [][]corev1.Container{template.Spec.InitContainers, template.Spec.Containers} {
			for c := range list {
				if !hasEnv(list[c].Env, "JOB_COMPLETION_INDEX") {
					list[c].Env = append(list[c].Env, corev1.EnvVar{Name: "JOB_COMPLETION_INDEX",
						ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
							FieldPath: fmt.Sprintf("metadata.labels['%s']", batchv1.JobCompletionIndexAnnotation)}}})
				}
			}
		}
	}
	count := int(ptr.Deref(job.Spec.Parallelism, 1))
	if indexed {
		count = int(ptr.Deref(job.Spec.Completions, 0))
	} else if job.Spec.Completions != nil && int(*job.Spec.Completions) < count {
		count = int(*job.Spec.Completions)
	}
	var pods []*corev1.Pod
	for index := 0; index < count; index++ {
		t := template.DeepCopy()
		pod := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: job.Namespace, Labels: t.Labels, Annotations: t.Annotations,
				GenerateName: job.Name + "-",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name,
					UID: types.UID(jobUID), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			},
			Spec: t.Spec,
		}
		if indexed {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(index)
			pod.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(index)
			pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, index)
			pod.GenerateName = fmt.Sprintf("%s-%d-", job.Name, index) // podGenerateNameWithIndex
		}
		// the Priority admission plugin, before mutating webhooks (no priorityClassName, no globalDefault)
		if pod.Spec.Priority == nil && pod.Spec.PriorityClassName == "" {
			pod.Spec.Priority = ptr.To[int32](0)
		}
		pods = append(pods, pod)
	}
	return pods
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func describePod(pod *corev1.Pod, job *batchv1.Job, jobIndex int) Pod {
	p := Pod{
		ReplicatedJob: job.Labels[jobsetv1alpha2.ReplicatedJobNameKey], JobIndex: jobIndex, Job: job.Name,
		GenerateName: pod.GenerateName, Hostname: pod.Spec.Hostname, Subdomain: pod.Spec.Subdomain,
		Labels: pod.Labels, Annotations: pod.Annotations, ServiceAccount: pod.Spec.ServiceAccountName,
		NodeSelector: pod.Spec.NodeSelector, Tolerations: pod.Spec.Tolerations, RestartPolicy: pod.Spec.RestartPolicy,
		Grace: pod.Spec.TerminationGracePeriodSeconds,
	}
	if v, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		i, _ := strconv.Atoi(v)
		p.PodIndex = &i
	}
	if p.Hostname != "" && p.Subdomain != "" {
		p.FQDN = p.Hostname + "." + p.Subdomain
	}
	for _, c := range pod.Spec.InitContainers {
		p.InitContainers = append(p.InitContainers, describeContainer(pod, c))
	}
	for _, c := range pod.Spec.Containers {
		p.Containers = append(p.Containers, describeContainer(pod, c))
	}
	return p
}

func describeContainer(pod *corev1.Pod, c corev1.Container) Container {
	out := Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, EnvFrom: c.EnvFrom,
		Ports: c.Ports, Resources: c.Resources, Env: []Env{}}
	for _, e := range c.Env {
		env := Env{Name: e.Name, ValueFrom: e.ValueFrom}
		if e.ValueFrom == nil {
			v := e.Value
			env.Value = &v
		} else if e.ValueFrom.FieldRef != nil {
			env.Resolved = resolveFieldRef(pod, e.ValueFrom.FieldRef.FieldPath)
		}
		out.Env = append(out.Env, env)
	}
	return out
}

// resolveFieldRef gives the downward API's value for what the pod's metadata already holds.
func resolveFieldRef(pod *corev1.Pod, path string) *string {
	lookup := func(prefix string, m map[string]string) *string {
		key := strings.TrimSuffix(strings.TrimPrefix(path, prefix+"['"), "']")
		if v, ok := m[key]; ok {
			return &v
		}
		return nil
	}
	switch {
	case strings.HasPrefix(path, "metadata.labels['"):
		return lookup("metadata.labels", pod.Labels)
	case strings.HasPrefix(path, "metadata.annotations['"):
		return lookup("metadata.annotations", pod.Annotations)
	case path == "metadata.namespace":
		return &pod.Namespace
	case path == "spec.serviceAccountName":
		v := pod.Spec.ServiceAccountName
		if v == "" {
			v = "default"
		}
		return &v
	}
	return nil
}
