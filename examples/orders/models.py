"""The app's payloads: an order, a charge, and the typed answer the agent gives."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Order(BaseModel):
    id: str
    customer: str
    amount_cents: int = Field(ge=0)
    complaint: str


class ChargeReceipt(BaseModel):
    order_id: str
    amount_cents: int
    charge_id: str


class RefundDecision(BaseModel):
    """What the agent decided for an order."""

    refund: bool
    amount_cents: int = Field(ge=0)
    reason: str
