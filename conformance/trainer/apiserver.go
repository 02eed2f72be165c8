// What the API server does with a create: the CRD's schema, the admission webhooks.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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

	"tfxd.dev/conformance/internal/crd"
)

// ---------------------------------------------------------------------------------------------------------
// the API server's handling of a create: CRD defaulting and pruning, mutating webhooks, CRD validation,
// validating webhooks.

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

func (w *webhooks) create(ctx context.Context, s *crd.Resource, object map[string]interface{}, namespace, resource string,
	mutating, validating []hook) (map[string]interface{}, []string, error) {
	if err := s.Decode(object); err != nil {
		return nil, nil, err
	}
	if s.Namespaced {
		object["metadata"].(map[string]interface{})["namespace"] = namespace
	}
	gvr := schemaGVR{s.GVK.Group, strings.Split(object["apiVersion"].(string), "/")[1], resource}
	var warnings []string
	object, ws, err := w.call(ctx, object, namespace, gvr, s.GVK.Kind, mutating, true)
	warnings = append(warnings, ws...)
	if err != nil {
		return nil, warnings, err
	}
	if len(mutating) > 0 {
		if err := s.Mutated(object); err != nil {
			return nil, warnings, err
		}
	}
	if err := s.Validate(ctx, object); err != nil {
		return nil, warnings, err
	}
	object, ws, err = w.call(ctx, object, namespace, gvr, s.GVK.Kind, validating, false)
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
