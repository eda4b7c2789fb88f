"""A toy durable agent and its crashmatrix adapter: the smallest agent the harness can host."""
