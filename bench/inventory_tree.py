"""Time `inventory` on a generated source tree of at least 50,000 lines (bar: under 10 s).

The tree (in a temp dir) holds server-like Python modules, some with hidden-state patterns, and TypeScript
modules on `@modelcontextprotocol/sdk` (about half the lines), analyzed with tree-sitter (the `inventory` extra;
without it the report's note says they were skipped).
Usage: .venv/bin/python bench/inventory_tree.py [--lines N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from mcp_stateless.inventory.engine import inventory

PY_MODULE = '''from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("bench-{n}")
seen_{n}: list[str] = []
LIMIT = {n}


@mcp.tool()
async def tool_{n}(text: str, ctx: Context) -> str:
    if {n} % 7 == 0:
        seen_{n}.append(text)
    words = [w.strip() for w in text.split()]
    total = sum(len(w) for w in words)
    return f"{{total}} {{LIMIT}}"
'''
PY_HELPER = '''def helper_{n}_{i}(values: list[int]) -> int:
    result = 0
    for v in values:
        if v % 2:
            result += v * {i}
        else:
            result -= v
    return result


'''
TS_MODULE = '''import {{ McpServer }} from "@modelcontextprotocol/sdk/server/mcp.js";
import {{ z }} from "zod";

const server = new McpServer({{ name: "bench-{n}", version: "1.0.0" }});
const sessions = new Map<string, number>();

server.registerTool("tool_{n}", {{ inputSchema: {{ text: z.string() }} }}, async ({{ text }}, extra) => {{
  if ({n} % 7 === 0) {{
    sessions.set(extra.sessionId ?? "", text.length);
  }}
  const words = text.split(" ").map((w) => w.trim());
  return {{ content: [{{ type: "text", text: `${{words.length}}` }}] }};
}});
'''
TS_HELPER = '''
export function helper{n}_{i}(values: number[]): number {{
  let total = 0;
  for (const v of values) {{
    if (v % 2) {{
      total += v * {i};
    }} else {{
      total -= v;
    }}
  }}
  return total;
}}
'''


def build(root: Path, target_lines: int) -> tuple[int, int]:
    """Write the tree; (lines written, of which TypeScript)."""
    lines, ts_lines, n = 0, 0, 0
    while lines < target_lines:
        py = PY_MODULE.format(n=n) + "".join(PY_HELPER.format(n=n, i=i) for i in range(20))
        (root / f"pkg{n % 10}").mkdir(exist_ok=True)
        (root / f"pkg{n % 10}" / f"server_{n}.py").write_text(py)
        ts = TS_MODULE.format(n=n) + "".join(TS_HELPER.format(n=n, i=i) for i in range(20))
        (root / f"pkg{n % 10}" / f"server_{n}.ts").write_text(ts)
        lines += py.count("\n") + ts.count("\n")
        ts_lines += ts.count("\n")
        n += 1
    return lines, ts_lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        written, ts_written = build(root, args.lines)
        start = time.perf_counter()
        inv = inventory(root)
        seconds = time.perf_counter() - start
    print(f"lines written {written} (TypeScript {ts_written}), files {inv.files}, lines inventoried {inv.lines}, "
          f"seconds {seconds:.2f}, findings {len(inv.findings)}")
    for note in inv.notes:
        print(f"note: {note}")
    print("bar: under 10 s:", "met" if seconds < 10 else "NOT met")


if __name__ == "__main__":
    main()
