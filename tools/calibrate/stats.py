# The calibration's statistics over measured runs: central values, prompt length, idle share.


def central(v):
    """The central value of a row's (or probe's) runs: the mean of the middle two thirds, a sixth
    of the values dropped at each end (2 of 12). Resampling the stored runs of sessions 17-21
    (every row and the 1-stage probe, 300 draws each), a row's lower median of 12 moved 3.4%
    (rms of the relative sd), this 2.6%, the plain mean 2.3%; the mean follows a slow spell's
    run or two wholly. Re-pricing those 13 runs this way, the rows' errors spread 3.6% (rms)
    where the lower median left 4.4%; the lower median had also put measured tokens/s low
    and probe busy time low, both pricing ~1% fast."""
    s = sorted(v)
    cut = len(s) // 6
    s = s[cut:len(s) - cut]
    return sum(s) / len(s)


def idle_share(run):
    """The share of the machine's CPU time that was idle over a run (0 where not recorded)."""
    return 1 - run["machine_busy_s"] / run["machine_cpu_s"] if run.get("machine_cpu_s") else 0.0


def prompt_tokens(runs):
    """Prompt tokens a request, by the server's count (central value over the runs), >= 1."""
    return max(1, round(central([x["total_input_tokens"] / max(1, x["completed"])
                                 for x in runs])))


def per_token(run):
    """The stages' busy seconds per output token of one measured run."""
    return run["stage_busy_s"] / max(1, run["total_output_tokens"])
