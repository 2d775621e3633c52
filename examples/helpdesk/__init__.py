"""A small support agent: look up an order, refund it (a person approves), email the customer."""
