"""Benchmark: the served policy's client cost per turn as the conversation grows (`openai:`).

A stateless API resends the whole history every turn. `OpenAIPolicy` JPEG-encodes each frame once
per episode and builds each message's JSON once, so a turn's client work should stay flat: this
script plays episodes of 10 crops (8 new frames a turn at the env's default 224x224 budget; turn
10's request holds 80 frames) and prints, per turn, the client's CPU (the policy's own
`stats["client_cpu_s"]`: building, encoding, sending and parsing, in this process), the wait for
the server and the client's share of the turn. Target: turn 10's client CPU at most 1.5x turn
1's (exit 1 above it).

By default the server is a stub in another process that answers at once (so its time is the
transport and its own JSON parsing); `--url URL#MODEL` measures against a real server, e.g. the
tiny model served by `scripts/vllm_cpu.sh serve DIR PORT --served-model-name tiny` (vLLM on CPU).

    python bench/bench_openai_client.py [--episodes 6] [--turns 10] [--url http://127.0.0.1:8000/v1#tiny]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
from pathlib import Path


def serve_stub(port_out) -> None:
    """An OpenAI-compatible stub: reads and parses the request, answers one short turn."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            reply = {"choices": [{"index": i, "message": {"role": "assistant", "content": "<think>more</think>"}, "finish_reason": "stop"}
                                 for i in range(body.get("n", 1))],
                     "usage": {"prompt_tokens": len(body["messages"]), "completion_tokens": 3}}  # fmt: skip
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_out.put(server.server_address[1])
    server.serve_forever()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=6, help="episodes measured (after one warm-up episode)")
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--url", default=None, help="URL#MODEL of a running server (default: a stub in another process)")
    p.add_argument("--frames", choices=["video", "images"], default="video")
    args = p.parse_args()

    from videoseek.agents.openai_policy import OpenAIPolicy
    from videoseek.agents.policy import PolicyInput
    from videoseek.agents.prompting import assistant_message, initial_messages, tool_message
    from videoseek.envs.env import EnvConfig, VideoSeekEnv
    from videoseek.envs.synth import generate_dataset

    stub = None
    if args.url is None:
        ports: multiprocessing.Queue = multiprocessing.Queue()
        stub = multiprocessing.Process(target=serve_stub, args=(ports,), daemon=True)
        stub.start()
        args.url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1#stub"
    tmp = Path(tempfile.mkdtemp(prefix="bench_openai_client_"))
    (sample,) = generate_dataset(tmp / "data", n=1, seed=3, kinds=("flash_colour",), min_duration=120, max_duration=120)
    config = EnvConfig(initial_frames=8, frames_per_call=8, max_turns=args.turns + 2, max_total_frames=8 * (args.turns + 2))
    policy = OpenAIPolicy(args.url, frames=args.frames, max_new_tokens=16, share_initial=False)
    cpu: list[list[float]] = [[] for _ in range(args.turns)]
    wait: list[list[float]] = [[] for _ in range(args.turns)]
    sizes: list[int] = [0] * args.turns
    try:
        for episode in range(args.episodes + 1):  # the first warms up (imports, connections)
            env = VideoSeekEnv(sample, config)
            obs, info = env.reset(seed=episode)
            messages = initial_messages(obs, info["instructions"])
            for turn in range(args.turns):
                item = PolicyInput(sample, messages, env.evidence, turn, f"{sample.id}/g{episode}", tools=info["tools"])
                before = dict(policy.stats)
                policy.act([item])
                if episode:
                    cpu[turn].append(policy.stats["client_cpu_s"] - before["client_cpu_s"])
                    wait[turn].append(policy.stats["wait_s"] - before["wait_s"])
                    sizes[turn] = sum(len(m.frames) for m in messages if m.frames is not None)
                start = 1 + turn * 100 / args.turns + episode * 0.37  # new frames every turn and episode
                text = f'<tool_call>{{"name": "crop_video", "arguments": {{"start": {start:.2f}, "end": {start + 8:.2f}}}}}</tool_call>'
                messages.append(assistant_message(text))
                obs, *_ = env.step(text)
                messages.append(tool_message(obs))
    finally:
        policy.close()
        if stub is not None:
            stub.terminate()
    print(f"server: {args.url}  frames: {args.frames}  {args.episodes} episodes, medians per turn")
    print("turn | frames sent | client CPU ms | server wait ms | client share")
    rows = []
    for t in range(args.turns):
        c, w = statistics.median(cpu[t]) * 1e3, statistics.median(wait[t]) * 1e3
        rows.append(c)
        print(f"{t + 1:4d} | {sizes[t]:11d} | {c:13.2f} | {w:14.2f} | {c / (c + w):11.1%}")
    ratio = rows[-1] / rows[0]
    print(f"client CPU, turn {args.turns} / turn 1: {ratio:.2f}x (target <= 1.5x)")
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
