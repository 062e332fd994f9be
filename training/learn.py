#!/usr/bin/env python
"""`make learn`: show, with numbers, that training here makes a policy better (2 CPU cores, about 33 min).

From nothing, each stage an ordinary command printed before it runs (repeat any by hand):

1. data: `videoseek synth` writes four disjoint sets (one seed each: 320 train for SFT, 64 val,
   192 held-out, and GRPO's pool) of the `flash_colour` curriculum: a large shape flashes for
   1-1.5 s between the 4 sparse initial frames, and the question asks its colour (five options,
   fixed order). The answer is read straight off the clue frames, and no initial frame shows it,
   so a policy must find the flash.
2. model: `videoseek tiny-model` builds the small random Qwen2.5-VL (random init).
3. traces: `videoseek rollout` of three scripted searchers on the train set - `sweep-hasty`
   (quarter windows in order, but it gives up after two and guesses), `sweep-shuffled` (windows
   in a random order until the flash shows: wrong first crops, then corrections; on half the
   samples) and `oracle-brief` (the clue directly, on a quarter) - and `videoseek export-sft`
   into conversations (right answers only). After their second crop most kept traces answer
   (the hasty teacher's, which saw the flash or guessed right) and few look on (the shuffled
   ones'), so SFT learns to search and read but answers after two crops whatever it saw: the
   decision to look on is left for GRPO to learn (a teacher that under-uses the tool; with full
   sweeps SFT reached 0.95 held-out accuracy and left GRPO no room, docs/training.md).
4. SFT: `training/run_sft.py` (local backend) from the random model on those conversations, with
   a validation loss on `sweep` traces of a third set (`data/val`, neither trained on nor evaluated).
5. GRPO: `training/run_csgrpo.py --backend local --config learn_cpu` from the SFT checkpoint,
   with the `csgrpo` preset, on questions of a fourth set (`data/pool`, steps x batch size of
   them) that SFT never saw.
6. evaluation: `videoseek rollout` + `videoseek eval` on the held-out set for `base`, `sft`,
   `grpo` and the `no-tool` and `oracle` scripted agents, with the same env and decoding.
7. `sft` and `grpo` again, sampled at GRPO's rollout temperature (RUN/eval/NAME-sampled): the
   policy GRPO optimises, where the greedy one may already sit at its mode.
8. `sft` and `grpo` greedy under the look-on probe (RUN/eval/NAME-probe, `rollout --look-on-probe`):
   two forced crops that missed every clue, then the policy decides whether to look on.

It writes RUN/summary.json (per stage: held-out accuracy, mean reward, coverage, valid-format
rate, rate of episodes with an accepted tool call (`crop_rate`, `videoseek.envs.metrics`),
episode count, 95 % intervals, checkpoint; the held-out samples path; the scripted baselines;
the GRPO - SFT reward difference paired by sample with its interval; the same for the sampled
evaluations; the look-on rates, of the stages' own episodes and under the probe; search and reading
apart, `clue_shown`, with the reading by answer; the checks of issue 12),
RUN/curves.png (GRPO reward, accuracy, KL and entropy per step, and the SFT loss with its
validation loss on sweeps of a third set), and every evaluation's trajectories under RUN/eval/
(`videoseek view RUN/eval/grpo`).

    python training/learn.py --out runs/learn            # what `make learn` runs
    python training/learn.py --out runs/learn --resume   # skip the stages whose outputs exist
    python training/learn.py --out runs/learn-seeds --seeds 0,1,2   # `make learn-seeds`: one run per seed
                                                                    # in RUN/seed_N, then RUN/seeds.json and a table
    python training/learn.py --out runs/learn-zoom --tools crop_video,zoom   # the env's tools, in every stage

`--tools` goes to every stage that makes an env: the traces' and evaluations' `videoseek rollout`
and GRPO's `run_csgrpo.py`; `export-sft` reads each trace run's tools from its run.json. The
scripted searchers only crop, so a list without crop_video leaves SFT nothing to learn from.

The GRPO checks compare GRPO with its own SFT checkpoint on the held-out questions, paired by
question: the mean difference of reward and of accuracy, each with its normal-approximation 95 %
interval (mean ± 1.96 s/√n, `agents.evaluate.mean_interval`); both lower bounds must be above 0.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: drop training/ from the path (its modules are videoseek.training.*)
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

HERE = Path(__file__).resolve().parent
CURRICULUM = ["--kinds", "flash_colour", "--min-duration", "10", "--max-duration", "10", "--avoid-uniform", "4"]
STAGES = ("base", "sft", "grpo")
BASELINES = ("no-tool", "oracle")
SAMPLED = ("sft", "grpo")  # evaluated a second time at GRPO's rollout temperature (RUN/eval/NAME-sampled)
PROBED = ("sft", "grpo")  # evaluated greedily under the look-on probe (RUN/eval/NAME-probe; agents.groups.look_on_start)
SEARCHERS = (("sweep-hasty", None), ("sweep-shuffled", 2), ("oracle-brief", 4))  # (policy, share 1/k of the samples)
VAL_N = 64  # samples whose sweeps give SFT's validation loss
REPORTED = ("accuracy", "reward", "coverage", "valid_format", "crop_rate")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/learn", help="run folder (default runs/learn)")
    p.add_argument("--train-n", type=int, default=320,
                   help="train samples, SFT's traces (default 320: on 160 SFT read purple as blue in seeds 1 and 3, "
                        "docs/experiments/2026-12-06-twice-the-demonstrations.md)")
    p.add_argument("--heldout-n", type=int, default=192,
                   help="held-out samples, one greedy episode each (default 192: for GRPO's gains measured at e30f0a5 the paired "
                        "accuracy check had 44-79 %% power per seed on 96 questions, 73-97 %% on 192; docs/training.md)")
    p.add_argument("--sft-epochs", type=int, default=16, help="SFT epochs over the demonstrations (default 16: reading the colour comes late, docs/training.md)")
    p.add_argument("--sft-lr", type=float, default=3e-3, help="SFT peak learning rate (a random tiny model wants ~1e-3; default 3e-3)")
    p.add_argument("--grpo-steps", type=int, default=None, help="GRPO steps (default: the learn_cpu config's)")
    p.add_argument("--eval-temperature", type=float, default=0.0, help="decoding for evaluation (default 0: greedy)")
    p.add_argument("--threads", type=int, default=2,
                   help="CPU threads: torch's in SFT, GRPO and the model evaluations, and synth's rendering processes (default 2: "
                        "the cores make learn is sized for; training's numbers may depend on it, so compare runs made with the same count)")
    p.add_argument("--seed", type=int, default=0, help="seed of the tiny model, SFT, GRPO and evaluation (default 0; the data sets have their own fixed seeds)")
    p.add_argument("--seeds", default=None, metavar="S,S,...",
                   help="run once per seed (RUN/seed_S each), then print per-seed and mean results and write RUN/seeds.json")
    p.add_argument("--tools", default=None, metavar="TOOL,TOOL,...",
                   help="the env's tools in every stage (videoseek rollout --tools, run_csgrpo.py --tools): names or import paths, "
                        "comma-separated (default: EnvConfig's)")
    p.add_argument("--advantage", choices=("trajectory", "turn"), default="turn",
                   help="GRPO's credit (run_csgrpo.py --advantage): turn-level (default: better than trajectory-level in 3 of 4 seeds, "
                        "docs/experiments/2026-12-05-turn-level-credit-100-steps.md) or trajectory-level (docs/training.md, 'Turn-level credit')")
    p.add_argument("--config", default="learn_cpu", metavar="NAME|YAML",
                   help="GRPO's ready config (run_csgrpo.py --config), whose env every stage takes (default learn_cpu); "
                        "a variant of it is how an experiment changes the reward or the loop")
    p.add_argument("--over-turn-mask", action="store_true", help="GRPO: Mini-o3's over-turn masking (run_csgrpo.py --over-turn-mask)")
    p.add_argument("--look-on-share", type=float, default=None, metavar="F",
                   help="GRPO: the share of groups that start from two forced crops that missed (run_csgrpo.py --look-on-share; "
                        "default: the learn_cpu config's, 0.25)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--resume", action="store_true", help="keep RUN and skip the stages whose outputs exist")
    group.add_argument("--overwrite", action="store_true", help="delete RUN first")
    return p.parse_args(argv)


def run(cmd: list[str], log: Path | None = None) -> None:
    """Print a stage's command, then run it (its output to the console, or to `log`)."""
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    if log is None:
        subprocess.run(cmd, check=True)
        return
    with log.open("w") as fh:
        done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if done.returncode:
        raise SystemExit(f"learn: stage failed (exit {done.returncode}); its output: {log}")


def env_flags(env: dict) -> list[str]:
    """`videoseek rollout` flags for the learn_cpu config's env block."""
    return [a for k, v in env.items() for a in ("--env", f"{k}={json.dumps(v)}")]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.seeds is None:
        return learn(args)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"learn: --seeds {args.seeds!r}: expected integers separated by commas, e.g. 0,1,2") from None
    out = Path(args.out)
    codes = {}
    for seed in seeds:
        print(f"# seed {seed}", flush=True)
        codes[seed] = learn(argparse.Namespace(**{**vars(args), "seed": seed, "seeds": None, "out": str(out / f"seed_{seed}")}))
    summaries = {seed: json.loads((out / f"seed_{seed}" / "summary.json").read_text()) for seed in seeds}
    report = seeds_report(summaries)
    (out / "seeds.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(seeds_table(report))
    return 1 if any(codes.values()) else 0


def learn(args: argparse.Namespace) -> int:
    """One `make learn` run with `args.seed`."""
    from videoseek.training.verl_plugin.config import load_ready_config

    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not (args.resume or args.overwrite):
        raise SystemExit(f"learn: {out} is not empty: pass --resume to continue it or --overwrite to start again")
    if args.overwrite and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    started = time.perf_counter()
    python, videoseek = sys.executable, [sys.executable, "-m", "videoseek"]
    config = load_ready_config(args.config)
    env = env_flags(config["env"])
    tools = ["--tools", args.tools] if args.tools is not None else []  # the env's tools, as every stage takes them
    common = ["--reward", config["reward"], *env, *tools, "--no-progress"]
    data = {name: out / "data" / name / "samples.jsonl" for name in ("train", "val", "heldout", "pool")}
    steps = args.grpo_steps or int(config["steps"])
    sampling_temperature = float(config["temperature"])  # GRPO's rollouts: the sampled evaluations use it too
    # GRPO's questions: a pool SFT never saw, as many as the run draws (reusing SFT's own questions let the
    # policy learn where the training videos' flashes are: train reward up, held-out down)
    pool_n = steps * int(config["batch_size"])
    checkpoints = {"base": out / "base_model", "sft": out / "sft" / "checkpoint", "grpo": out / "grpo" / "checkpoint"}

    def stage(done: Path, cmd: list[str], log: str | None = None) -> None:
        if args.resume and done.exists():
            print(f"# exists, skipped: {done}", flush=True)
            return
        run(cmd, out / "logs" / log if log else None)

    # 1-2. data and the random model
    for name, seed, n in (("train", 1, args.train_n), ("heldout", 2, args.heldout_n), ("val", 3, VAL_N), ("pool", 4, pool_n)):
        stage(data[name], [*videoseek, "synth", "--out", str(data[name].parent), "--n", str(n), "--seed", str(seed), *CURRICULUM,
                           "--workers", str(args.threads)],  # fmt: skip
              log=f"synth_{name}.log")
    stage(checkpoints["base"] / "config.json", [*videoseek, "tiny-model", "--out", str(checkpoints["base"]), "--seed", str(args.seed)])

    # 3. search traces -> SFT conversations
    for policy, share in SEARCHERS:
        limit = ["--limit", str(max(1, args.train_n // share))] if share else []
        stage(out / "traces" / policy / "trajectories.jsonl",
              [*videoseek, "rollout", "--data", str(data["train"]), "--policy", policy, "--out", str(out / "traces" / policy), *limit, *common])  # fmt: skip
    sft_data = out / "sft_data" / "train.parquet"
    stage(sft_data, [*videoseek, "export-sft", "--runs", *(str(out / "traces" / p) for p, _ in SEARCHERS), "--out", str(sft_data.parent)])
    # SFT's validation loss, on sweeps of a third set (neither trained on nor evaluated): the curve shows when reading starts
    stage(out / "traces_val" / "trajectories.jsonl",
          [*videoseek, "rollout", "--data", str(data["val"]), "--policy", "sweep", "--out", str(out / "traces_val"), *common])
    sft_val = out / "sft_val" / "train.parquet"
    stage(sft_val, [*videoseek, "export-sft", "--runs", str(out / "traces_val"), "--out", str(sft_val.parent)])

    def evaluate(name: str, policy: str, temperature: float | None = None, probe: bool = False) -> None:
        run_dir = out / "eval" / name
        temperature = args.eval_temperature if temperature is None else temperature
        model = ["--temperature", str(temperature), "--max-new-tokens", str(config["max_turn_tokens"]), "--seed", str(args.seed),
                 "--threads", str(args.threads)]  # fmt: skip
        stage(run_dir / "trajectories.jsonl",
              [*videoseek, "rollout", "--data", str(data["heldout"]), "--policy", policy, "--out", str(run_dir), *common,
               *(model if policy.startswith("hf:") else []), *(["--look-on-probe"] if probe else [])], log=f"eval_{name}.log")  # fmt: skip
        stage(run_dir / "metrics.json", [*videoseek, "eval", str(run_dir)], log=f"eval_{name}_metrics.log")

    # 4-6. base, SFT, GRPO, each evaluated on the held-out set
    evaluate("base", f"hf:{checkpoints['base']}")
    stage(checkpoints["sft"] / "config.json",
          [python, str(HERE / "run_sft.py"), "--model", str(checkpoints["base"]), "--data", str(sft_data), "--val-data", str(sft_val), "--out", str(out / "sft"),
           "--epochs", str(args.sft_epochs), "--lr", str(args.sft_lr), "--batch-size", "8", "--freeze-vision", "--threads", str(args.threads),
           "--seed", str(args.seed)])  # fmt: skip
    evaluate("sft", f"hf:{checkpoints['sft']}")
    grpo_state = checkpoints["grpo"] / "trainer_state.json"
    done = grpo_state.is_file() and json.loads(grpo_state.read_text())["step"] >= steps
    again = ["--resume"] if grpo_state.is_file() else ["--overwrite"]  # continue a stopped GRPO run, else start clean
    stage(grpo_state if done else out / "grpo" / "not-finished",
          [python, str(HERE / "run_csgrpo.py"), "--backend", "local", "--config", args.config, "--model", str(checkpoints["sft"]),
           "--data", str(data["pool"]), "--out", str(out / "grpo"), "--threads", str(args.threads), "--seed", str(args.seed), "--steps", str(steps),
           "--advantage", args.advantage, *(["--over-turn-mask"] if args.over_turn_mask else []),
           *(["--look-on-share", str(args.look_on_share)] if args.look_on_share is not None else []), *tools, *again])  # fmt: skip
    evaluate("grpo", f"hf:{checkpoints['grpo']}")
    for name in BASELINES:
        evaluate(name, name)
    # 7. SFT and GRPO again, sampled at GRPO's rollout temperature: the policy GRPO optimises
    for name in SAMPLED:
        evaluate(f"{name}-sampled", f"hf:{checkpoints[name]}", temperature=sampling_temperature)
    # 8. SFT and GRPO greedy from the state where looking on is the decision (two crops that missed):
    # the look-on rate on every question, not only where the policy itself missed twice
    for name in PROBED:
        evaluate(f"{name}-probe", f"hf:{checkpoints[name]}", probe=True)

    # --resume: add this invocation's time to the earlier ones' (their summary's), not replace it
    earlier = json.loads((out / "summary.json").read_text()).get("seconds", 0.0) if args.resume and (out / "summary.json").is_file() else 0.0
    summary = write_summary(out, data["heldout"], checkpoints, earlier + time.perf_counter() - started, sampling_temperature)
    plot_curves(out / "grpo" / "metrics.jsonl", out / "sft" / "metrics.jsonl", out / "curves.png")
    print(markdown_table(summary))
    print(f"summary: {out / 'summary.json'}\ncurves: {out / 'curves.png'}\ntrajectories: videoseek view {out / 'eval' / 'grpo'}")
    failed = [k for k, v in summary["checks"].items() if not v]
    if failed:
        print(f"learn: checks not met: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


# ---- the summary ---------------------------------------------------------------------------------
def stage_metrics(run_dir: Path) -> tuple[dict, dict[str, dict[str, float]]]:
    """(reported metrics with 95 % intervals, per-sample episode metrics) of one evaluation run."""
    from videoseek.agents.evaluate import episode_metrics, summarize
    from videoseek.envs.trajectory import read_trajectories

    trajs = read_trajectories(run_dir)
    m = summarize(trajs)
    reported = {k: m[k] for k in REPORTED + ("look_on", "look_on_n", "clue_shown")} | {"episodes": m["episodes"], "failures": m["failures"]}
    reported["intervals"] = {k: m["intervals"][k] for k in REPORTED}
    per_sample = {t.sample_id: episode_metrics(t) for t in trajs if t.group.role == "origin" and t.failure is None}
    return reported, per_sample


def paired_difference(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], key: str) -> dict:
    """Mean of b - a over the samples both ran, with its 95 % interval (a paired comparison)."""
    from videoseek.agents.evaluate import mean_interval

    common = sorted(set(a) & set(b))
    mean, low, high = mean_interval([b[s][key] - a[s][key] for s in common])
    return {"mean": mean, "interval": [low, high], "samples": len(common)}


def write_summary(out: Path, heldout: Path, checkpoints: dict[str, Path], seconds: float, temperature: float) -> dict:
    stages, per = {}, {}
    for name in (*STAGES, *BASELINES, *(f"{s}-sampled" for s in SAMPLED), *(f"{s}-probe" for s in PROBED)):
        stages[name], per[name] = stage_metrics(out / "eval" / name)
    for name in STAGES:
        stages[name]["checkpoint"] = str(checkpoints[name])
    reward_gain = paired_difference(per["sft"], per["grpo"], "reward")
    accuracy_gain = paired_difference(per["sft"], per["grpo"], "accuracy")
    # Room above SFT: the paired accuracy gain of a GRPO policy right on every question. Its lower
    # bound is the most the accuracy check can see; near 0 (SFT at 0.958 on 96 questions gives
    # +0.001), the check cannot pass whatever GRPO learns.
    all_right = {sample: {"accuracy": 1.0} for sample in per["sft"]}
    accuracy_room = paired_difference(per["sft"], all_right, "accuracy")
    summary = {
        "heldout_data": str(heldout),
        **{name: stages[name] for name in STAGES},
        "baselines": {name: stages[name] for name in BASELINES},
        "grpo_minus_sft": {"reward": reward_gain, "accuracy": accuracy_gain, "accuracy_if_all_right": accuracy_room},
        # Reported, not checked: the checks stay on greedy decoding, as `make learn` has always evaluated.
        "sampled": {
            "temperature": temperature,
            **{name: stages[f"{name}-sampled"] for name in SAMPLED},
            "grpo_minus_sft": {key: paired_difference(per["sft-sampled"], per["grpo-sampled"], key) for key in ("reward", "accuracy")},
        },
        # Reported, not checked: greedy from two forced crops that missed (the look-on probe)
        "probe": {name: stages[f"{name}-probe"] for name in PROBED},
        "checks": {
            "heldout_episodes>=64": min(stages[s]["episodes"] for s in STAGES) >= 64,
            "sft_valid_format>=0.9": stages["sft"]["valid_format"] >= 0.9,
            "sft_crop_rate>=0.8": stages["sft"]["crop_rate"] >= 0.8,
            "grpo_reward_gain_low>0": reward_gain["interval"][0] > 0,
            "grpo_accuracy_gain_low>0": accuracy_gain["interval"][0] > 0,
            "grpo_accuracy>no_tool": stages["grpo"]["accuracy"] > stages["no-tool"]["accuracy"],
        },
        "seconds": round(seconds, 1),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def markdown_table(summary: dict) -> str:
    """The README's table: one row per stage and baseline, held-out metrics with 95 % intervals."""
    rows = [("base", summary["base"]), ("sft", summary["sft"]), ("grpo", summary["grpo"])] + list(summary["baselines"].items())
    lines = ["| agent | episodes | accuracy | mean reward | coverage | valid format | calls a tool |", "|---|---|---|---|---|---|---|"]
    for name, m in rows:
        cells = [f"{m[k]:.3f} [{m['intervals'][k][0]:.2f}, {m['intervals'][k][1]:.2f}]" for k in REPORTED]
        lines.append(f"| {name} | {m['episodes']} | " + " | ".join(cells) + " |")
    gain = summary["grpo_minus_sft"]["reward"]
    lines.append(f"\nGRPO - SFT held-out mean reward, paired by sample: {gain['mean']:+.3f} [{gain['interval'][0]:+.3f}, {gain['interval'][1]:+.3f}]")
    sampled = summary["sampled"]
    for key in ("accuracy", "reward"):
        g = sampled["grpo_minus_sft"][key]
        lines.append(f"Sampled at T = {sampled['temperature']}: GRPO - SFT held-out {key} {g['mean']:+.3f} [{g['interval'][0]:+.3f}, {g['interval'][1]:+.3f}] (reported, not checked)")
    look = [f"{name} {_rate(summary[name].get('look_on'))} of {summary[name].get('look_on_n', 0)}" for name in ("sft", "grpo")]
    lines.append("Look-on rate (greedy held-out episodes whose first two crops left coverage at 0, next turn another crop): " + ", ".join(look))
    shown = [f"{name} {_rate(summary[name]['clue_shown']['shown'])} (accuracy there {_rate(summary[name]['clue_shown']['accuracy_shown'])}, "
             f"elsewhere {_rate(summary[name]['clue_shown']['accuracy_unshown'])}{_worst_read(summary[name]['clue_shown'].get('by_answer'))})"
             for name in ("sft", "grpo") if "clue_shown" in summary[name]]
    if shown:
        lines.append("Clue shown (greedy held-out episodes where a frame lay in a clue interval: the search; accuracy there: the reading, "
                     "and the answer read worst with what was answered for it): " + ", ".join(shown))
    probe = [f"{name} {_rate(m.get('look_on'))} of {m.get('look_on_n', 0)} (accuracy {m['accuracy']:.3f})" for name, m in summary.get("probe", {}).items()]
    if probe:
        lines.append("Look-on probe (greedy, after two forced crops that missed; agents.groups.look_on_start): " + ", ".join(probe))
    room = summary["grpo_minus_sft"]["accuracy_if_all_right"]["interval"][0]
    lines.append(f"Room above SFT: a GRPO right on every question would gain accuracy with lower bound {room:+.3f}")
    return "\n".join(lines)


def _worst_read(by_answer: dict[str, dict] | None) -> str:
    """"; worst answer E 0.000 of 29 (D 29)": the answer read worst where shown (envs.metrics.reading_by_answer)."""
    if not by_answer:
        return ""
    answer, row = min(by_answer.items(), key=lambda item: item[1]["accuracy"])
    answered = ", ".join(f"{k} {v}" for k, v in row["predictions"].items())
    return f"; worst answer {answer} {row['accuracy']:.3f} of {row['n']} ({answered})"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def seeds_report(summaries: dict[int, dict]) -> dict:
    """Per seed: SFT and GRPO held-out accuracy and reward, GRPO - SFT (paired) and the checks; and their means."""
    rows = {}
    for seed, s in summaries.items():
        rows[seed] = {
            "sft_accuracy": s["sft"]["accuracy"], "grpo_accuracy": s["grpo"]["accuracy"],
            "sft_reward": s["sft"]["reward"], "grpo_reward": s["grpo"]["reward"],
            "accuracy_gain": s["grpo_minus_sft"]["accuracy"], "reward_gain": s["grpo_minus_sft"]["reward"],
            "accuracy_room_low": s["grpo_minus_sft"]["accuracy_if_all_right"]["interval"][0],
            "sampled_accuracy_gain": s["sampled"]["grpo_minus_sft"]["accuracy"], "sampled_reward_gain": s["sampled"]["grpo_minus_sft"]["reward"],
            "sft_look_on": s["sft"].get("look_on"), "grpo_look_on": s["grpo"].get("look_on"),
            **{f"{name}_probe_look_on": s.get("probe", {}).get(name, {}).get("look_on") for name in PROBED},
            "checks_failed": [k for k, v in s["checks"].items() if not v],
        }  # fmt: skip
    keys = ("sft_accuracy", "grpo_accuracy", "sft_reward", "grpo_reward")
    mean = {k: sum(r[k] for r in rows.values()) / len(rows) for k in keys}
    for k in ("accuracy_gain", "reward_gain", "sampled_accuracy_gain", "sampled_reward_gain"):
        mean[k] = sum(r[k]["mean"] for r in rows.values()) / len(rows)
    return {"seeds": rows, "mean": mean, "passed": [s for s, r in rows.items() if not r["checks_failed"]]}


def seeds_table(report: dict) -> str:
    """One row per seed and the mean: held-out accuracy and reward of SFT and GRPO, and GRPO - SFT paired by question.

    "room" is the accuracy gain's lower bound if GRPO were right on every question: the most the
    accuracy check could see above that seed's SFT. The last two columns compare the same
    checkpoints sampled at GRPO's rollout temperature (reported, not checked).
    """
    def gain(g: dict) -> str:
        return f"{g['mean']:+.3f} [{g['interval'][0]:+.3f}, {g['interval'][1]:+.3f}]"

    lines = ["| seed | SFT accuracy | GRPO accuracy | GRPO - SFT accuracy | room | SFT reward | GRPO reward | GRPO - SFT reward | sampled: accuracy | sampled: reward | SFT / GRPO look-on | SFT / GRPO look-on probe | checks |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for seed, r in report["seeds"].items():
        checks = "pass" if not r["checks_failed"] else "fail: " + ", ".join(r["checks_failed"])
        lines.append(f"| {seed} | {r['sft_accuracy']:.3f} | {r['grpo_accuracy']:.3f} | {gain(r['accuracy_gain'])} | {r['accuracy_room_low']:+.3f} | "
                     f"{r['sft_reward']:.3f} | {r['grpo_reward']:.3f} | {gain(r['reward_gain'])} | "
                     f"{gain(r['sampled_accuracy_gain'])} | {gain(r['sampled_reward_gain'])} | "
                     f"{_rate(r.get('sft_look_on'))} / {_rate(r.get('grpo_look_on'))} | "
                     f"{_rate(r.get('sft_probe_look_on'))} / {_rate(r.get('grpo_probe_look_on'))} | {checks} |")  # fmt: skip
    m = report["mean"]
    lines.append(f"| mean | {m['sft_accuracy']:.3f} | {m['grpo_accuracy']:.3f} | {m['accuracy_gain']:+.3f} | | "
                 f"{m['sft_reward']:.3f} | {m['grpo_reward']:.3f} | {m['reward_gain']:+.3f} | "
                 f"{m['sampled_accuracy_gain']:+.3f} | {m['sampled_reward_gain']:+.3f} | | | {len(report['passed'])}/{len(report['seeds'])} |")  # fmt: skip
    return "\n".join(lines)


def plot_curves(grpo_metrics: Path, sft_metrics: Path, png: Path) -> None:
    """GRPO reward, accuracy, KL and entropy per step, and the SFT loss (train per step, validation per epoch), in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grpo = [json.loads(line) for line in grpo_metrics.read_text().splitlines() if line.strip()]
    sft = [json.loads(line) for line in sft_metrics.read_text().splitlines() if line.strip()]
    panels = [("GRPO mean reward", grpo, "reward"), ("GRPO accuracy", grpo, "accuracy"), ("GRPO KL to reference", grpo, "kl"),
              ("GRPO policy entropy (nats/token)", grpo, "entropy"), ("SFT loss (assistant tokens)", sft, "loss")]  # fmt: skip
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2))
    for ax, (title, rows, key) in zip(axes, panels):
        points = [(r["step"], r[key]) for r in rows if key in r]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="." if len(points) < 60 else None)
        ax.set_title(title, fontsize=10)
        if key == "loss":
            val = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]  # once per epoch, on the val sweeps
            ax.plot([p[0] for p in val], [p[1] for p in val], marker="o", label="validation")
            ax.legend(fontsize=8)
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
