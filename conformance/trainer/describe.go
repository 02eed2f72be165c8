// What the judge prints of each pod the Job controller makes.
package main

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

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
