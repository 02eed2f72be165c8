// What the API server does with a create: the CRD's schema, the admission webhooks.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetwebhooks "sigs.k8s.io/jobset/pkg/webhooks"
	"sigs.k8s.io/yaml"

	trainerruntime "github.com/kubeflow/trainer/v2/pkg/runtime"
	trainerwebhooks "github.com/kubeflow/trainer/v2/pkg/webhooks"
)

// ---------------------------------------------------------------------------------------------------------
// the API server's handling of a create: CRD defaulting and pruning, mutating webhooks, CRD validation,
// validating webhooks.

type crdSchema struct {
	group, kind string
	namespaced  bool
	validator   validation.SchemaCreateValidator
	structural  *schema.Structural
	cel         *cel.Validator
}

func loadCRD(path, version string) (*crdSchema, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return nil, fmt.Errorf("the CRD %s: %w", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != version || v.Schema == nil {
			continue
		}
		internal := apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return nil, err
		}
		structural, err := schema.NewStructural(&internal)
		if err != nil {
			return nil, fmt.Errorf("the CRD %s: %w", path, err)
		}
		validator, _, err := validation.NewSchemaValidator(&internal)
		if err != nil {
			return nil, err
		}
		return &crdSchema{group: crd.Spec.Group, kind: crd.Spec.Names.Kind,
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped, validator: validator, structural: structural,
			cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}, nil
	}
	return nil, fmt.Errorf("the CRD %s has no %s schema", path, version)
}

// decode is what the API server does while decoding a custom resource: defaults, then pruning.
func (s *crdSchema) decode(object map[string]interface{}) error {
	defaulting.Default(object, s.structural)
	if unknown := pruning.PruneWithOptions(object, s.structural, true, schema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("strict decoding error: unknown field %s", quoteAll(unknown))
	}
	if err, _ := objectmeta.CoerceWithOptions(nil, object, s.structural, true, objectmeta.CoerceOptions{ReturnUnknownFieldPaths: true}); err != nil {
		return fmt.Errorf("%s", err.Error())
	}
	return nil
}

// validate is customResourceStrategy.Validate (k8s.io/apiextensions-apiserver pkg/registry/customresource).
func (s *crdSchema) validate(ctx context.Context, object map[string]interface{}) error {
	resource := &unstructured.Unstructured{Object: object}
	errs := apimachineryvalidation.ValidateObjectMetaAccessor(resource, s.namespaced,
		apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validation.ValidateCustomResource(nil, object, s.validator)...)
	errs = append(errs, objectmeta.Validate(nil, object, s.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.structural, object)...)
	if s.cel != nil && len(errs) == 0 {
		celErrs, _ := s.cel.Validate(ctx, nil, s.structural, object, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s.%s %q is invalid: %s", s.kind, s.group, resource.GetName(), errs.ToAggregate().Error())
	}
	return nil
}

type hook struct{ path, name string }

type schemaGVR struct{ group, version, resource string }

type webhooks struct {
	server *recordingServer
}

func newWebhooks(scheme *runtime.Scheme, cl client.Client) (*webhooks, error) {
	return newWebhooksFor(scheme, cl, nil)
}

// newWebhooksFor registers Trainer's and JobSet's webhooks exactly as their managers do (webhooks.Setup),
// on a manager that only records the handlers.
func newWebhooksFor(scheme *runtime.Scheme, cl client.Client, runtimes map[string]trainerruntime.Runtime) (*webhooks, error) {
	if cl == nil {
		cl = fake.NewClientBuilder().WithScheme(scheme).Build()
	}
	mgr := &recordingManager{scheme: scheme, client: cl, server: &recordingServer{hooks: map[string]http.Handler{}}}
	if kind, err := trainerwebhooks.Setup(mgr, runtimes); err != nil {
		return nil, fmt.Errorf("Trainer's %s webhook: %w", kind, err)
	}
	if err := jobsetwebhooks.Setup(mgr); err != nil {
		return nil, fmt.Errorf("JobSet's webhooks: %w", err)
	}
	return &webhooks{server: mgr.server}, nil
}

func (w *webhooks) create(ctx context.Context, s *crdSchema, object map[string]interface{}, namespace, resource string,
	mutating, validating []hook) (map[string]interface{}, []string, error) {
	if err := s.decode(object); err != nil {
		return nil, nil, err
	}
	if s.namespaced {
		object["metadata"].(map[string]interface{})["namespace"] = namespace
	}
	gvr := schemaGVR{s.group, strings.Split(object["apiVersion"].(string), "/")[1], resource}
	var warnings []string
	object, ws, err := w.call(ctx, object, namespace, gvr, s.kind, mutating, true)
	warnings = append(warnings, ws...)
	if err != nil {
		return nil, warnings, err
	}
	if err := s.decode(object); err != nil { // the API server defaults and prunes again after mutating webhooks
		return nil, warnings, err
	}
	if err := s.validate(ctx, object); err != nil {
		return nil, warnings, err
	}
	object, ws, err = w.call(ctx, object, namespace, gvr, s.kind, validating, false)
	warnings = append(warnings, ws...)
	return object, warnings, err
}

// admit runs webhooks only (built-in types: their API validation is not reproduced here).
func (w *webhooks) admit(ctx context.Context, object map[string]interface{}, namespace string, gvr schemaGVR, kind string,
	mutating, validating []hook) (map[string]interface{}, []string, error) {
	object, warnings, err := w.call(ctx, object, namespace, gvr, kind, mutating, true)
	if err != nil {
		return nil, warnings, err
	}
	object, ws, err := w.call(ctx, object, namespace, gvr, kind, validating, false)
	return object, append(warnings, ws...), err
}

func (w *webhooks) call(ctx context.Context, object map[string]interface{}, namespace string, gvr schemaGVR, kind string,
	hooks []hook, mutating bool) (map[string]interface{}, []string, error) {
	var warnings []string
	for _, h := range hooks {
		handler, ok := w.server.hooks[h.path].(*admission.Webhook)
		if !ok {
			return nil, warnings, fmt.Errorf("no webhook registered at %s", h.path)
		}
		raw, err := json.Marshal(object)
		if err != nil {
			return nil, warnings, err
		}
		name, _, _ := unstructured.NestedString(object, "metadata", "name")
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID:       "admission-request",
			Kind:      metav1.GroupVersionKind{Group: gvr.group, Version: gvr.version, Kind: kind},
			Resource:  metav1.GroupVersionResource{Group: gvr.group, Version: gvr.version, Resource: gvr.resource},
			Name:      name,
			Namespace: namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		}}
		resp := handler.Handle(ctx, req)
		warnings = append(warnings, resp.Warnings...)
		if !resp.Allowed {
			message := "denied"
			if resp.Result != nil && resp.Result.Message != "" {
				message = resp.Result.Message
			}
			return nil, warnings, fmt.Errorf("admission webhook %q denied the request: %s", h.name, message)
		}
		if mutating && len(resp.Patches) > 0 {
			patchJSON, err := json.Marshal(resp.Patches)
			if err != nil {
				return nil, warnings, err
			}
			patch, err := jsonpatch.DecodePatch(patchJSON)
			if err != nil {
				return nil, warnings, err
			}
			patched, err := patch.Apply(raw)
			if err != nil {
				return nil, warnings, fmt.Errorf("applying the patch of %s: %w", h.name, err)
			}
			object = map[string]interface{}{}
			if err := json.Unmarshal(patched, &object); err != nil {
				return nil, warnings, err
			}
		}
	}
	return object, warnings, nil
}

// recordingManager is the part of a controller-runtime manager that webhook registration uses.
type recordingManager struct {
	manager.Manager // nil: any other method panics
	scheme          *runtime.Scheme
	client          client.Client
	server          *recordingServer
}

func (m *recordingManager) GetScheme() *runtime.Scheme           { return m.scheme }
func (m *recordingManager) GetClient() client.Client             { return m.client }
func (m *recordingManager) GetAPIReader() client.Reader          { return m.client }
func (m *recordingManager) GetConfig() *rest.Config              { return &rest.Config{} }
func (m *recordingManager) GetWebhookServer() webhook.Server     { return m.server }
func (m *recordingManager) GetLogger() logr.Logger               { return logr.Discard() }
func (m *recordingManager) GetFieldIndexer() client.FieldIndexer { return noIndexer{} }

type recordingServer struct{ hooks map[string]http.Handler }

func (s *recordingServer) NeedLeaderElection() bool             { return false }
func (s *recordingServer) Register(path string, h http.Handler) { s.hooks[path] = h }
func (s *recordingServer) Start(context.Context) error          { return errors.New("not a server") }
func (s *recordingServer) StartedChecker() healthz.Checker      { return healthz.Ping }
func (s *recordingServer) WebhookMux() *http.ServeMux           { return nil }

type indexRecorder struct{ builder *fake.ClientBuilder }

func (r indexRecorder) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	r.builder.WithIndex(obj, field, fn)
	return nil
}

type noIndexer struct{}

func (noIndexer) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// ---------------------------------------------------------------------------------------------------------

func readObject(path, apiVersion, kind string) (map[string]interface{}, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	object := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &object); err != nil {
		return nil, fmt.Errorf("%s is not YAML or JSON: %w", path, err)
	}
	if object["apiVersion"] != apiVersion || object["kind"] != kind {
		return nil, fmt.Errorf("%s: not a %s %s: apiVersion %v, kind %v", path, apiVersion, kind, object["apiVersion"], object["kind"])
	}
	if _, ok := object["metadata"].(map[string]interface{}); !ok {
		object["metadata"] = map[string]interface{}{}
	}
	return object, nil
}

func quoteAll(paths []string) string {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = strconv.Quote(p)
	}
	return strings.Join(quoted, ", ")
}
