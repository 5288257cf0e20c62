// Package chartcheck checks the manifests the Helm chart (deploy/helm/oncebox) renders,
// without a cluster: every document is decoded strictly into the official k8s.io/api
// types (or, for the CloudNativePG Cluster and the Prometheus Operator ServiceMonitor,
// into the small vendored structs of crds.go), so an unknown or misspelled field fails;
// then the promises the chart makes are asserted: every Deployment has readiness and
// liveness probes, a terminationGracePeriodSeconds longer than the job timeout, a
// PodDisruptionBudget selecting it, and secrets only through secretKeyRef.
package chartcheck
