"""A customer-support agent on the OpenAI Agents SDK: looks up an order, emails the customer."""
