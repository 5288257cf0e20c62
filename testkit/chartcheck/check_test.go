package chartcheck_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/testkit/chartcheck"
)

// good is a rendering that keeps every promise, in the shape the chart renders.
const good = `# Source: oncebox/templates/deployment-worker.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: r-oncebox-worker
spec:
  selector:
    matchLabels: {app.kubernetes.io/component: worker}
  template:
    metadata:
      labels: {app.kubernetes.io/component: worker}
    spec:
      terminationGracePeriodSeconds: 50
      containers:
        - name: oncebox
          image: oncebox
          env:
            - name: DATABASE_URL
              valueFrom: {secretKeyRef: {name: oncebox, key: database-url}}
            - name: ONCEBOX_ROLES
              value: worker
          readinessProbe:
            httpGet: {path: /readyz, port: health}
          livenessProbe:
            httpGet: {path: /livez, port: health}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: r-oncebox-worker
spec:
  minAvailable: 1
  selector:
    matchLabels: {app.kubernetes.io/component: worker}
`

// TestCheckCatches: the check passes the rendering that keeps the promises and fails
// each one that breaks one, saying which.
func TestCheckCatches(t *testing.T) {
	t.Parallel()
	require.NoError(t, chartcheck.Check([]byte(good), 30*time.Second))
	for _, tc := range []struct{ name, old, new, want string }{
		{"a secret inlined", "valueFrom: {secretKeyRef: {name: oncebox, key: database-url}}", `value: "postgres://u:p@db/app"`, "DATABASE_URL as a literal value"},
		{"a missing readiness probe", "          readinessProbe:\n            httpGet: {path: /readyz, port: health}\n", "", "no readinessProbe"},
		{"a missing liveness probe", "          livenessProbe:\n            httpGet: {path: /livez, port: health}\n", "", "no livenessProbe"},
		{"a grace period shorter than the job timeout", "terminationGracePeriodSeconds: 50", "terminationGracePeriodSeconds: 20", "must exceed the job timeout"},
		{"no PodDisruptionBudget", "kind: PodDisruptionBudget\nmetadata:\n  name: r-oncebox-worker\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels: {app.kubernetes.io/component: worker}", "kind: PodDisruptionBudget\nmetadata:\n  name: r-oncebox-worker\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels: {app.kubernetes.io/component: api}", "no PodDisruptionBudget"},
		{"a misspelled field", "terminationGracePeriodSeconds: 50", "terminationGracePeriodSecond: 50", "unknown field"},
		{"an unknown kind", "kind: PodDisruptionBudget", "kind: PodDisruptionBudgets", "does not know"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bad := strings.Replace(good, tc.old, tc.new, 1)
			require.NotEqual(t, good, bad, "the case changes the rendering")
			err := chartcheck.Check([]byte(bad), 30*time.Second)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestCRDsDecodeStrictly: a misspelled field of the CloudNativePG Cluster fails too.
func TestCRDsDecodeStrictly(t *testing.T) {
	t.Parallel()
	cluster := "apiVersion: postgresql.cnpg.io/v1\nkind: Cluster\nmetadata: {name: db}\nspec:\n  instances: 3\n  storage: {size: 1Gi}\n  postgresql:\n    synchronous: {method: any, number: 1}\n"
	_, err := chartcheck.Decode([]byte(cluster))
	require.NoError(t, err)
	_, err = chartcheck.Decode([]byte(strings.Replace(cluster, "instances", "instance", 1)))
	require.ErrorContains(t, err, "unknown field")
}
