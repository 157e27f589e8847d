# docs/examples/porting/openrath_parallel.py
from concurrent.futures import ThreadPoolExecutor

from rho_notebook.flow import AgentParam, Session, Tool, Workflow, run_session_loop

market_tool = Tool(
    "market_quotes",
    "The latest quotes of the ticker named in the arguments, as JSON",
    ["python3", "tools/market_quotes.py", "quotes.json"],  # the ticker's entry of quotes.json
)


class TradingWorkflow(Workflow):
    def __init__(self, provider: str = "main"):
        super().__init__()
        self.analyst = AgentParam(Session.from_agent_prompt("Analyse the market."), provider)
        self.researcher_bear = AgentParam(Session.from_agent_prompt("Argue the bear case."), provider)
        self.researcher_bull = AgentParam(Session.from_agent_prompt("Argue the bull case."), provider)
        self.trader = AgentParam(Session.from_agent_prompt("Decide the trade."), provider)

    def forward(self, session: Session) -> Session:
        analysed = run_session_loop(
            session,
            self.analyst.agent_session,
            agent_provider=self.analyst.provider,
            tools=[market_tool],
        )

        bear_input = analysed.fork()
        bull_input = analysed.fork()

        with ThreadPoolExecutor(max_workers=2) as pool:
            bear_future = pool.submit(
                run_session_loop,
                bear_input,
                self.researcher_bear.agent_session,
                agent_provider=self.researcher_bear.provider,
                tools=None,
            )
            bull_future = pool.submit(
                run_session_loop,
                bull_input,
                self.researcher_bull.agent_session,
                agent_provider=self.researcher_bull.provider,
                tools=None,
            )
            bear_session = bear_future.result()
            bull_session = bull_future.result()

        def last_assistant_text(s: Session) -> str:
            return s.text() or ""

        trader_input = Session.from_user_message(
            "Combine the two research branches.\n\n"
            f"Bear branch:\n{last_assistant_text(bear_session)}\n\n"
            f"Bull branch:\n{last_assistant_text(bull_session)}"
        ).to("local")

        return run_session_loop(
            trader_input,
            self.trader.agent_session,
            agent_provider=self.trader.provider,
            tools=None,
        )
