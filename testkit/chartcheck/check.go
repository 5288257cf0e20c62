package chartcheck

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// secretEnv matches the environment variables that carry a secret: they must come from
// a secretKeyRef, never a literal value.
var secretEnv = regexp.MustCompile(`^(DATABASE_URL|.*(_KEY|_SECRET|_TOKEN|_PASSWORD))$`)

// Manifests is what Check found in a rendering.
type Manifests struct {
	Deployments []appsv1.Deployment
	PDBs        []policyv1.PodDisruptionBudget
	Jobs        []batchv1.Job
}

// Check decodes every document of rendered (helm template's output) strictly and
// returns the first broken promise, naming the document. jobTimeout is the job timeout
// the deployments' grace period must exceed.
func Check(rendered []byte, jobTimeout time.Duration) error {
	m, err := Decode(rendered)
	if err != nil {
		return err
	}
	if len(m.Deployments) == 0 {
		return errors.New("no Deployment rendered")
	}
	var errs []error
	for _, d := range m.Deployments {
		errs = append(errs, checkDeployment(d, m.PDBs, jobTimeout))
	}
	for _, j := range m.Jobs {
		errs = append(errs, checkSecrets("Job "+j.Name, j.Spec.Template.Spec))
	}
	return errors.Join(errs...)
}

// Decode splits rendered into documents and decodes each strictly by its kind.
func Decode(rendered []byte) (Manifests, error) {
	var m Manifests
	for i, doc := range bytes.Split(rendered, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return m, fmt.Errorf("document %d: %w", i, err)
		}
		if err := decodeOne(&m, head.APIVersion+" "+head.Kind, doc); err != nil {
			return m, fmt.Errorf("document %d (%s %s): %w", i, head.APIVersion, head.Kind, err)
		}
	}
	return m, nil
}

// decodeOne decodes one document of the given "apiVersion kind" strictly.
func decodeOne(m *Manifests, kind string, doc []byte) error {
	switch kind {
	case "apps/v1 Deployment":
		var d appsv1.Deployment
		err := yaml.UnmarshalStrict(doc, &d)
		m.Deployments = append(m.Deployments, d)
		return err
	case "policy/v1 PodDisruptionBudget":
		var p policyv1.PodDisruptionBudget
		err := yaml.UnmarshalStrict(doc, &p)
		m.PDBs = append(m.PDBs, p)
		return err
	case "batch/v1 Job":
		var j batchv1.Job
		err := yaml.UnmarshalStrict(doc, &j)
		m.Jobs = append(m.Jobs, j)
		return err
	case "v1 Service":
		return yaml.UnmarshalStrict(doc, &corev1.Service{})
	case "postgresql.cnpg.io/v1 Cluster":
		return yaml.UnmarshalStrict(doc, &cnpgCluster{})
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return yaml.UnmarshalStrict(doc, &serviceMonitor{})
	}
	return fmt.Errorf("a kind the check does not know: add it to chartcheck.decodeOne")
}

// checkDeployment checks one Deployment's probes, grace period, PDB and secrets.
func checkDeployment(d appsv1.Deployment, pdbs []policyv1.PodDisruptionBudget, jobTimeout time.Duration) error {
	name := "Deployment " + d.Name
	spec := d.Spec.Template.Spec
	var errs []error
	for _, c := range spec.Containers {
		if c.ReadinessProbe == nil {
			errs = append(errs, fmt.Errorf("%s: container %s has no readinessProbe", name, c.Name))
		}
		if c.LivenessProbe == nil {
			errs = append(errs, fmt.Errorf("%s: container %s has no livenessProbe", name, c.Name))
		}
	}
	grace := spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= jobTimeout {
		errs = append(errs, fmt.Errorf("%s: terminationGracePeriodSeconds must exceed the job timeout %s, so a rolling update never cuts a dispatch it could finish", name, jobTimeout))
	}
	if !hasPDB(d, pdbs) {
		errs = append(errs, fmt.Errorf("%s: no PodDisruptionBudget selects its pods", name))
	}
	errs = append(errs, checkSecrets(name, spec))
	return errors.Join(errs...)
}

// hasPDB reports whether one of pdbs selects d's pods.
func hasPDB(d appsv1.Deployment, pdbs []policyv1.PodDisruptionBudget) bool {
	for _, p := range pdbs {
		if p.Spec.Selector == nil || len(p.Spec.Selector.MatchLabels) == 0 {
			continue
		}
		match := true
		for k, v := range p.Spec.Selector.MatchLabels {
			if d.Spec.Template.Labels[k] != v {
				match = false
			}
		}
		if match {
			return true
		}
	}
	return false
}

// checkSecrets refuses a secret environment variable with a literal value.
func checkSecrets(name string, spec corev1.PodSpec) error {
	var errs []error
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		for _, e := range c.Env {
			if !secretEnv.MatchString(e.Name) {
				continue
			}
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				errs = append(errs, fmt.Errorf("%s: container %s takes %s as a literal value: secrets must come from an existing Secret (secretKeyRef)", name, c.Name, e.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// stripComments drops the comment lines helm template writes (# Source: ...).
func stripComments(doc []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}
