import { describe, expect, it } from "vitest";

import type { Change } from "../src/types";
import { nodeView, TestSource } from "./fixtures";

describe("BaseDagSource", () => {
  it("starts empty: no views, no run, no detail, nothing selected, the local clock", () => {
    const source = new TestSource();
    expect(source.nodes()).toEqual({});
    expect(source.run()).toEqual({});
    expect(source.detail()).toEqual({});
    expect(source.selected()).toBe("");
    expect(source.clockOffset()).toBe(0);
  });

  it("reads back what a subclass stored", () => {
    const source = new TestSource().set({ nodes: { build: nodeView("running") }, run: { lifecycle: "running" }, selected: "build", offset: 250 });
    expect(source.nodes().build.state).toBe("running");
    expect(source.run().lifecycle).toBe("running");
    expect(source.selected()).toBe("build");
    expect(source.clockOffset()).toBe(250);
  });

  it("tells every listener about a change, and no one about an empty change", () => {
    const source = new TestSource();
    const first: Change[] = [];
    const second: Change[] = [];
    source.subscribe((c) => first.push(c));
    source.subscribe((c) => second.push(c));
    source.announce({});
    source.announce({ nodes: ["build"] });
    expect(first).toEqual([{ nodes: ["build"] }]);
    expect(second).toEqual([{ nodes: ["build"] }]);
  });

  it("stops telling a listener once it unsubscribed", () => {
    const source = new TestSource();
    const seen: Change[] = [];
    const unsubscribe = source.subscribe((c) => seen.push(c));
    source.announce({ run: true });
    unsubscribe();
    source.announce({ run: true });
    expect(seen).toHaveLength(1);
    expect(source.listenerCount).toBe(0);
  });
});
