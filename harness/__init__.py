"""crashmatrix: kill a durable agent at every commit boundary, restart it, verify its promises."""
