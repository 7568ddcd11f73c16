package opensearch

// sourceConfig configures a source.
type sourceConfig struct {
	conn connConfig
}

// SourceOption configures a source; see the functions that return one.
type SourceOption interface{ applySource(*sourceConfig) }
