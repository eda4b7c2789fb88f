"""A CHANGELOG agent in a checkpointed Microsoft Agent Framework workflow (`workflow.build`)."""
