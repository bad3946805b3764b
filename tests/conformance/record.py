#!/usr/bin/env python3
"""Records seed 000's canonical ARSC graph (LangGraph) on scripted scenarios.

The graph is the seed's Section 4 code: same state, same four nodes, same
conditional edge (decide_to_generate_or_rewrite), same edges. Only the external
calls are scripted: vector_retriever returns a fixed document list per call,
grader_llm answers one grade per document from the scenario, rewriter_llm and
generator_llm return the scenario's texts in order.

For every scenario it writes tests/conformance/recorded/<name>.json with the
scripted inputs, the node sequence and the final state. tests/conformance.rs runs
graphs/arsc-canonical.yaml on the same inputs and compares. CI uses the committed
files; this script needs Python and `pip install -r tests/conformance/requirements.txt`
(langgraph==0.2.76).

Usage: python3 tests/conformance/record.py [--check]
"""
import json
import sys
from pathlib import Path
from typing import List, TypedDict

from langgraph.graph import END, StateGraph
import importlib.metadata as md

OUT = Path(__file__).resolve().parent / "recorded"


def doc(i, text):
    return {"id": f"doc{i}", "content": text, "metadata": {"source": f"page{i}.html"}}


# name -> (question, max_iterations, retrievals, grades per retrieval, rewrites, generations)
SCENARIOS = {
    "relevant_first_try": dict(
        question="What is LangGraph?", max_iterations=3,
        retrievals=[[doc(1, "LangGraph is a library for stateful agents."), doc(2, "Self-correction in RAG.")]],
        grades=[["yes", "yes"]], rewrites=[], generations=["LangGraph builds stateful agents."]),
    "relevant_after_one_rewrite": dict(
        question="What is LG?", max_iterations=3,
        retrievals=[[doc(1, "Unrelated text."), doc(2, "More unrelated text.")],
                    [doc(3, "LangGraph is a library."), doc(4, "Other.")]],
        grades=[["no", "no"], ["yes", "no"]], rewrites=["What is the LangGraph library?"],
        generations=["LangGraph is a library."]),
    "relevant_after_two_rewrites": dict(
        question="lg?", max_iterations=3,
        retrievals=[[doc(1, "a")], [doc(2, "b")], [doc(3, "LangGraph graphs.")]],
        grades=[["no"], ["no"], ["yes"]], rewrites=["langgraph", "LangGraph library graphs"],
        generations=["It builds graphs."]),
    "exhausted": dict(
        question="Who won the 1954 World Cup?", max_iterations=3,
        retrievals=[[doc(1, "x"), doc(2, "y")], [doc(3, "z")], [doc(4, "w")], [doc(5, "v")]],
        grades=[["no", "no"], ["no"], ["no"], ["no"]], rewrites=["q2", "q3", "q4"], generations=[]),
    "exhausted_max_one": dict(
        question="Unanswerable?", max_iterations=1,
        retrievals=[[doc(1, "x")], [doc(2, "y")]],
        grades=[["no"], ["no"]], rewrites=["Unanswerable, rephrased?"], generations=[]),
    "mixed_grades": dict(
        question="How does self-correction work?", max_iterations=3,
        retrievals=[[doc(1, "a"), doc(2, "Self-correction grades documents."), doc(3, "c"),
                     doc(4, "Rewrites the query when nothing is relevant.")]],
        grades=[["no", "yes", "no", "yes"]], rewrites=[], generations=["It grades and rewrites."]),
    "empty_retrieval": dict(
        question="Anything?", max_iterations=2,
        retrievals=[[], [doc(1, "Something relevant.")]],
        grades=[[], ["yes"]], rewrites=["Anything at all?"], generations=["Something."]),
}


class Document(TypedDict):
    id: str
    content: str
    metadata: dict


class AgentState(TypedDict):
    question: str
    documents: List[Document]
    generation: str
    iteration_count: int
    max_iterations: int
    context_history: List[str]


def build(sc):
    retrievals = list(sc["retrievals"])
    grades = list(sc["grades"])
    rewrites = list(sc["rewrites"])
    generations = list(sc["generations"])

    def vector_retriever(query):
        return [dict(d) for d in retrievals.pop(0)]

    def grader_llm(question, documents):
        verdicts = grades.pop(0)
        assert len(verdicts) == len(documents)
        return [{"document_id": d["id"], "binary_score": v, "confidence": 0.9} for d, v in zip(documents, verdicts)]

    def rewriter_llm(original_question, irrelevant_docs):
        return rewrites.pop(0)

    def generator_llm(question, relevant_docs):
        return generations.pop(0)

    # --- the seed's node functions, verbatim in logic ---
    def retrieve_node(state):
        documents = vector_retriever(state["question"])
        return {"documents": documents, "context_history": state["context_history"] + ["Documents retrieved."]}

    def grade_documents_node(state):
        question = state["question"]
        documents = state["documents"]
        grading_results = grader_llm(question, documents)
        relevant_docs, irrelevant_docs = [], []
        all_irrelevant = True
        grade_map = {res["document_id"]: res["binary_score"] for res in grading_results}
        for d in documents:
            if grade_map.get(d["id"]) == "yes":
                relevant_docs.append(d)
                all_irrelevant = False
            else:
                irrelevant_docs.append(d)
        if all_irrelevant:
            return {"documents": irrelevant_docs, "context_history": state["context_history"] + ["Decision: All documents are irrelevant."]}
        return {"documents": relevant_docs, "context_history": state["context_history"] + ["Decision: Relevant documents found."]}

    def rewrite_query_node(state):
        new_query = rewriter_llm(state["question"], state["documents"])
        return {"question": new_query, "iteration_count": state["iteration_count"] + 1,
                "context_history": state["context_history"] + [f"Query rewritten to: {new_query}"]}

    def generate_node(state):
        generation = generator_llm(state["question"], state["documents"])
        return {"generation": generation, "context_history": state["context_history"] + ["Answer generated."]}

    def decide_to_generate_or_rewrite(state):
        if not state["documents"] or "Decision: All documents are irrelevant." in state["context_history"][-1]:
            if state["iteration_count"] >= state["max_iterations"]:
                return "end"
            return "rewrite_query"
        return "generate"

    wf = StateGraph(AgentState)
    wf.add_node("retriever", retrieve_node)
    wf.add_node("grader", grade_documents_node)
    wf.add_node("rewriter", rewrite_query_node)
    wf.add_node("generator", generate_node)
    wf.set_entry_point("retriever")
    wf.add_edge("retriever", "grader")
    wf.add_conditional_edges("grader", decide_to_generate_or_rewrite,
                             {"rewrite_query": "rewriter", "generate": "generator", "end": END})
    wf.add_edge("rewriter", "retriever")
    wf.add_edge("generator", END)
    return wf.compile()


def record(name, sc):
    inputs = {"question": sc["question"], "max_iterations": sc["max_iterations"], "iteration_count": 0,
              "context_history": []}
    path = []
    for update in build(sc).stream(dict(inputs), stream_mode="updates"):
        path.extend(update.keys())
    final = build(sc).invoke(dict(inputs))
    return {
        "scenario": name,
        "recorded_with": {"langgraph": md.version("langgraph"), "python": sys.version.split()[0]},
        "inputs": {k: sc[k] for k in ("question", "max_iterations", "retrievals", "grades", "rewrites", "generations")},
        "path": path,
        "final_state": final,
    }


def main():
    check = "--check" in sys.argv
    OUT.mkdir(parents=True, exist_ok=True)
    changed = 0
    for name, sc in SCENARIOS.items():
        text = json.dumps(record(name, sc), indent=2, sort_keys=True) + "\n"
        target = OUT / f"{name}.json"
        if check:
            if not target.exists() or target.read_text() != text:
                print(f"differs: {target}")
                changed += 1
        else:
            target.write_text(text)
            print(f"wrote {target}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
