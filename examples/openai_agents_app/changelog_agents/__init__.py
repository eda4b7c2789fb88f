"""A CHANGELOG agent written the way an OpenAI Agents SDK user writes one (`agent.build`)."""
