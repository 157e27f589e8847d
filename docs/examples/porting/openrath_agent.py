# docs/examples/porting/openrath_agent.py
from rho_notebook import flow

agent = flow.Agent(
    system_prompt="Answer clearly.",
    provider="main",
)
