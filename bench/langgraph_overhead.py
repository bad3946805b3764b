#!/usr/bin/env python3
"""LangGraph's own overhead on seed 000's canonical ARSC graph, with instant nodes.

Same topology and node logic as tests/conformance/record.py (and
graphs/arsc-canonical.yaml): the retriever, grader, rewriter and generator answer
immediately from fixed data. Prints microseconds per invoke and per step for the
happy path (3 steps) and the exhausted path (max_iterations 3: 11 steps).

Needs langgraph (pip install -r tests/conformance/requirements.txt).
Usage: python3 bench/langgraph_overhead.py [--json]
"""
import json
import sys
import time
from typing import List, TypedDict

from langgraph.graph import END, StateGraph


class AgentState(TypedDict):
    question: str
    documents: List[dict]
    generation: str
    iteration_count: int
    max_iterations: int
    context_history: List[str]


DOCS = [
    {"id": "d1", "content": "Cargo check checks your code.", "metadata": {"source": "d1.html"}},
    {"id": "d2", "content": "Ownership rules.", "metadata": {"source": "d2.html"}},
]


def build(relevant):
    def retrieve_node(state):
        return {"documents": [dict(d) for d in DOCS], "context_history": state["context_history"] + ["Documents retrieved."]}

    def grade_documents_node(state):
        grades = {d["id"]: ("yes" if relevant and d["id"] == "d1" else "no") for d in state["documents"]}
        rel = [d for d in state["documents"] if grades.get(d["id"]) == "yes"]
        if not rel:
            return {"documents": state["documents"], "context_history": state["context_history"] + ["Decision: All documents are irrelevant."]}
        return {"documents": rel, "context_history": state["context_history"] + ["Decision: Relevant documents found."]}

    def rewrite_query_node(state):
        q = "q" + str(state["iteration_count"] + 2)
        return {"question": q, "iteration_count": state["iteration_count"] + 1, "context_history": state["context_history"] + [f"Query rewritten to: {q}"]}

    def generate_node(state):
        return {"generation": "Cargo check checks. [d1.html]", "context_history": state["context_history"] + ["Answer generated."]}

    def decide(state):
        if not state["documents"] or "Decision: All documents are irrelevant." in state["context_history"][-1]:
            return "end" if state["iteration_count"] >= state["max_iterations"] else "rewrite_query"
        return "generate"

    wf = StateGraph(AgentState)
    wf.add_node("retriever", retrieve_node)
    wf.add_node("grader", grade_documents_node)
    wf.add_node("rewriter", rewrite_query_node)
    wf.add_node("generator", generate_node)
    wf.set_entry_point("retriever")
    wf.add_edge("retriever", "grader")
    wf.add_conditional_edges("grader", decide, {"rewrite_query": "rewriter", "generate": "generator", "end": END})
    wf.add_edge("rewriter", "retriever")
    wf.add_edge("generator", END)
    return wf.compile()


def measure(app, steps, n):
    inputs = {"question": "What does cargo check do?", "max_iterations": 3, "iteration_count": 0, "context_history": []}
    for _ in range(20):
        app.invoke(dict(inputs))
    best = None
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            app.invoke(dict(inputs))
        per = (time.perf_counter() - t) / n * 1e6
        best = per if best is None else min(best, per)
    return {"us_per_invoke": best, "steps": steps, "us_per_step": best / steps}


def main():
    res = {
        "happy_path_3_steps": measure(build(True), 3, 200),
        "exhausted_11_steps": measure(build(False), 11, 100),
    }
    if "--json" in sys.argv:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"langgraph {k}: {v['us_per_invoke']:.1f} us/invoke, {v['us_per_step']:.1f} us/step")


if __name__ == "__main__":
    main()
