// training-operator judges a TFJob manifest with the Kubeflow Training Operator's own code (v1.9, the line
// that serves kubeflow.org/v1 TFJob), in the order a cluster applies it to a new TFJob:
//
//  1. the API server with the TFJob CRD from the operator's module (manifests/base/crds/kubeflow.org_tfjobs.yaml):
//     structural defaulting, pruning (an unknown field is refused, as `kubectl apply --validate=strict`
//     does), the OpenAPI schema, object metadata and list types (k8s.io/apiextensions-apiserver);
//  2. the operator's validating webhook (pkg/webhooks/tensorflow, ValidateCreate);
//  3. the controller's defaults (SetDefaults_TFJob) and the TF_CONFIG it writes into each replica's
//     `tensorflow` container (TFJobReconciler.SetClusterSpec).
//
// Usage: training-operator [--crd FILE] MANIFEST (YAML or JSON). Prints one JSON object on stdout,
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
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	tfctrl "github.com/kubeflow/training-operator/pkg/controller.v1/tensorflow"
	tfwebhook "github.com/kubeflow/training-operator/pkg/webhooks/tensorflow"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"
)

func main() {
	crd := flag.String("crd", "", "the TFJob CRD (default: kubeflow.org_tfjobs.yaml beside this program)")
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
	configs, err := judge(*crd, flag.Arg(0))
	if err != nil {
		refuse("%v", err)
	}
	out, _ := json.MarshalIndent(configs, "", "  ")
	fmt.Println(string(out))
}

func refuse(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func judge(crdPath, manifestPath string) (map[string]*string, error) {
	validator, structural, err := loadSchema(crdPath)
	if err != nil {
		return nil, fmt.Errorf("the CRD %s: %w", crdPath, err)
	}
	raw, err := os.ReadFile(manifestPath)
	if err != nil {
		return nil, err
	}
	object := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &object); err != nil {
		return nil, fmt.Errorf("%s is not YAML or JSON: %w", manifestPath, err)
	}
	if object["apiVersion"] != "kubeflow.org/v1" || object["kind"] != "TFJob" {
		return nil, fmt.Errorf("not a kubeflow.org/v1 TFJob: apiVersion %v, kind %v", object["apiVersion"], object["kind"])
	}
	// the API server: defaults, pruning, then validation (customresource_handler.go, strategy.go)
	defaulting.Default(object, structural)
	if unknown := pruning.PruneWithOptions(object, structural, true, schema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("strict decoding error: unknown field %s", quoteAll(unknown))
	}
	if err, _ := objectmeta.CoerceWithOptions(nil, object, structural, true, objectmeta.CoerceOptions{ReturnUnknownFieldPaths: true}); err != nil {
		return nil, fmt.Errorf("%s", err.Error())
	}
	resource := &unstructured.Unstructured{Object: object}
	errs := validation.ValidateCustomResource(nil, object, validator)
	errs = append(errs, apimachineryvalidation.ValidateObjectMetaAccessor(resource, true,
		apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, objectmeta.Validate(nil, object, structural, true)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, structural, object)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("TFJob.kubeflow.org %q is invalid: %s", resource.GetName(), errs.ToAggregate().Error())
	}
	job := &kubeflowv1.TFJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(object, job); err != nil {
		return nil, err
	}
	// the operator's admission webhook
	ctrl.SetLogger(logr.Discard())
	if _, err := (&tfwebhook.Webhook{}).ValidateCreate(context.Background(), job); err != nil {
		return nil, fmt.Errorf("admission webhook \"validator.tfjob.training-operator.kubeflow.org\" denied the request: %w", err)
	}
	// the controller: its defaults, then TF_CONFIG for each replica as it creates the pods
	kubeflowv1.SetDefaults_TFJob(job)
	configs := map[string]*string{}
	for rtype, spec := range job.Spec.TFReplicaSpecs {
		for index := 0; index < int(*spec.Replicas); index++ {
			template := spec.Template.DeepCopy()
			kind := strings.ToLower(string(rtype))
			if err := (&tfctrl.TFJobReconciler{}).SetClusterSpec(job, template, kind, strconv.Itoa(index)); err != nil {
				return nil, fmt.Errorf("%s %d: %w", kind, index, err)
			}
			configs[fmt.Sprintf("%s-%d", kind, index)] = tfConfig(template)
		}
	}
	return configs, nil
}

func loadSchema(path string) (validation.SchemaCreateValidator, *schema.Structural, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	crd := apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return nil, nil, err
	}
	for _, version := range crd.Spec.Versions {
		if version.Name != "v1" || version.Schema == nil {
			continue
		}
		internal := apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(version.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return nil, nil, err
		}
		structural, err := schema.NewStructural(&internal)
		if err != nil {
			return nil, nil, err
		}
		validator, _, err := validation.NewSchemaValidator(&internal)
		if err != nil {
			return nil, nil, err
		}
		return validator, structural, nil
	}
	return nil, nil, fmt.Errorf("no v1 schema")
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

func quoteAll(paths []string) string {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = strconv.Quote(p)
	}
	return strings.Join(quoted, ", ")
}
