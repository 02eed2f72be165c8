// Package crd is the Kubernetes API server's handling of a create of a custom resource, for this module's
// judges. It is built from a CRD file the way the apiextensions-apiserver serves a CRD
// (pkg/apiserver/customresource_handler.go, getOrCreateServingInfoFor): the structural schema with its
// defaults pruned, the schema validators, and the real strategy (pkg/registry/customresource, NewStrategy),
// whose PrepareForCreate and Validate (metadata, the OpenAPI schema, scale, embedded objects, list types,
// CEL rules) run as they are. The decoding steps that package keeps unexported (schemaCoercingDecoder,
// unstructuredSchemaCoercer.apply, unstructuredDefaulter) are called here, in its order, from their
// exported parts.
package crd

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Resource is one served version of a CRD.
type Resource struct {
	GVK        runtimeschema.GroupVersionKind
	Namespaced bool
	structural *schema.Structural
	strategy   interface { // customresource's strategy, whose type is unexported
		PrepareForCreate(ctx context.Context, obj runtime.Object)
		Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	}
}

// Load reads a CRD (YAML or JSON) and builds what the API server serves for its version `version`.
func Load(path, version string) (*Resource, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		return nil, fmt.Errorf("the CRD %s: %w", path, err)
	}
	r, err := serve(crd, version)
	if err != nil {
		return nil, fmt.Errorf("the CRD %s: %w", path, err)
	}
	return r, nil
}

func serve(crd *apiextensionsv1.CustomResourceDefinition, version string) (*Resource, error) {
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	if val == nil {
		return nil, fmt.Errorf("no %s schema", version)
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, err
	}
	structural, err := schema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	structural = structural.DeepCopy()
	if err := defaulting.PruneDefaults(structural); err != nil {
		return nil, err
	}
	validator, _, err := validation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	subresources, err := apihelpers.GetSubresourcesForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	var status *apiextensions.CustomResourceSubresourceStatus
	var statusValidator validation.SchemaValidator
	if subresources != nil && subresources.Status != nil {
		status = &apiextensions.CustomResourceSubresourceStatus{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceStatus_To_apiextensions_CustomResourceSubresourceStatus(subresources.Status, status, nil); err != nil {
			return nil, err
		}
		if statusSchema, ok := internal.OpenAPIV3Schema.Properties["status"]; ok {
			if statusValidator, _, err = validation.NewSchemaValidator(&statusSchema); err != nil {
				return nil, err
			}
		}
	}
	var scale *apiextensions.CustomResourceSubresourceScale
	if subresources != nil && subresources.Scale != nil {
		scale = &apiextensions.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subresources.Scale, scale, nil); err != nil {
			return nil, err
		}
	}
	var selectable []apiextensionsv1.SelectableField
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			selectable = v.SelectableFields
		}
	}
	gvk := runtimeschema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind}
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	return &Resource{GVK: gvk, Namespaced: namespaced, structural: structural,
		strategy: customresource.NewStrategy(unstructuredscheme.NewUnstructuredObjectTyper(), namespaced, gvk,
			validator, statusValidator, structural, status, scale, selectable)}, nil
}

// Decode is the request body's decoding with fieldValidation=Strict (`kubectl apply --validate=strict`):
// unknown fields are pruned and refused in the strict decoder's words, then the schema's defaults are set
// (the codec's defaulter runs after its decoder).
func (r *Resource) Decode(object map[string]interface{}) error {
	unknown, err := r.coerce(object, true)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		errs := make([]error, len(unknown))
		for i, path := range unknown {
			errs[i] = fmt.Errorf(`unknown field "%s"`, path)
		}
		return runtime.NewStrictDecodingError(errs)
	}
	r.defaults(object)
	return nil
}

// Mutated is what follows a mutating webhook's patch: the admission dispatcher sets the defaults on the
// patched object, and its conversion for storage prunes what the schema does not know, silently.
func (r *Resource) Mutated(object map[string]interface{}) error {
	r.defaults(object)
	_, err := r.coerce(object, false)
	return err
}

// Validate is the registry's create: the strategy's PrepareForCreate, then its Validate; a refusal in the
// API server's words (apierrors.NewInvalid).
func (r *Resource) Validate(ctx context.Context, object map[string]interface{}) error {
	resource := &unstructured.Unstructured{Object: object}
	r.strategy.PrepareForCreate(ctx, resource)
	if errs := r.strategy.Validate(ctx, resource); len(errs) > 0 {
		return apierrors.NewInvalid(r.GVK.GroupKind(), resource.GetName(), errs)
	}
	return nil
}

// coerce is unstructuredSchemaCoercer.apply for a CRD that does not preserve unknown fields: the metadata
// read apart, the rest pruned to the schema and its non-nullable nulls dropped, embedded objects' metadata
// coerced, then the metadata put back as the API server normalised it. It returns the unknown fields' paths.
func (r *Resource) coerce(object map[string]interface{}, report bool) ([]string, error) {
	kind, foundKind, err := unstructured.NestedString(object, "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(object, "apiVersion")
	if err != nil {
		return nil, err
	}
	meta, foundMeta, unknown, err := objectmeta.GetObjectMetaWithOptions(object,
		objectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: report})
	if err != nil {
		return nil, err
	}
	gv, err := runtimeschema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	if gv.Group == r.GVK.Group && kind == r.GVK.Kind {
		unknown = append(unknown, pruning.PruneWithOptions(object, r.structural, true,
			schema.UnknownFieldPathOptions{TrackUnknownFieldPaths: report})...)
		defaulting.PruneNonNullableNullsWithoutDefaults(object, r.structural)
		err, paths := objectmeta.CoerceWithOptions(nil, object, r.structural, false,
			objectmeta.CoerceOptions{ReturnUnknownFieldPaths: report})
		if err != nil {
			return nil, err
		}
		unknown = append(unknown, paths...)
	}
	if foundKind {
		object["kind"] = kind
	}
	if foundAPIVersion {
		object["apiVersion"] = apiVersion
	}
	if foundMeta {
		if err := objectmeta.SetObjectMeta(object, meta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// defaults is unstructuredDefaulter.Default: the schema's defaults, for this CRD's kind only.
func (r *Resource) defaults(object map[string]interface{}) {
	resource := &unstructured.Unstructured{Object: object}
	if resource.GroupVersionKind().GroupKind() == r.GVK.GroupKind() {
		defaulting.Default(object, r.structural)
	}
}
