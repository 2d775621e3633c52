"""An order workflow of a Temporal app that asks a steadyloop agent to decide a refund
and refunds through the app's own `charge_card` activity, a person approving the call."""
