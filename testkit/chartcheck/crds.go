package chartcheck

// The fields of the CRDs the chart renders, as their operators' schemas define them
// (CloudNativePG postgresql.cnpg.io/v1 Cluster, Prometheus Operator
// monitoring.coreos.com/v1 ServiceMonitor), limited to the fields the chart may set:
// a field not listed fails the strict decoding, as the CRD's structural schema would
// refuse an unknown one.

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type cnpgCluster struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   objectMeta  `json:"metadata"`
	Spec       clusterSpec `json:"spec"`
}

type clusterSpec struct {
	Instances int `json:"instances"`
	Storage   struct {
		Size         string `json:"size"`
		StorageClass string `json:"storageClass,omitempty"`
	} `json:"storage"`
	PostgreSQL *struct {
		Parameters  map[string]string `json:"parameters,omitempty"`
		Synchronous *struct {
			Method         string `json:"method"`
			Number         int    `json:"number"`
			DataDurability string `json:"dataDurability,omitempty"`
		} `json:"synchronous,omitempty"`
	} `json:"postgresql,omitempty"`
	Bootstrap *struct {
		InitDB *struct {
			Database string `json:"database,omitempty"`
			Owner    string `json:"owner,omitempty"`
		} `json:"initdb,omitempty"`
	} `json:"bootstrap,omitempty"`
}

type serviceMonitor struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port              string `json:"port"`
			Path              string `json:"path,omitempty"`
			Interval          string `json:"interval,omitempty"`
			BearerTokenSecret *struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"bearerTokenSecret,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}
