"""A customer-support agent on LangGraph: looks up an order, emails the customer."""
