#!/usr/bin/env python3
"""Turns the JSON lines of one bench/run.sh invocation into bench/results/<date>-<machine>.md and
one loss-vs-wall-time chart per workload (gnuplot, PNG).  Standard library only.

usage: report.py RAW_DIR OUT_MD [--title TEXT] [--workloads "W1 W2 …"] [--preamble FILE]
                 [--device cpu|cuda]

RAW_DIR holds, per run, <workload>__<variant>__<tool>__<rep>.jsonl (stdout of a driver) and a
.log beside it (stderr); <workload>.notice replaces a workload's table (a workload not run) and
<workload>.note goes above it (the data and settings of that run).  W1.pair / W2.pair name the
lmtrain row the issue-7 target is judged on (the one with the peer's damping), W6.headline the
lmtrain row chosen before the run for the W6 headline; loadavg.txt has the load average before
each repetition ("W rep l1 l5 l15").  A run whose output has no "result" object is reported as failed with the
last lines of its error output.  Rep 0 is the warm-up and never enters a figure.

lmtrain's runs of W1, W2 and W3 also carry the device roofline (issue 4): the measured copy
bandwidth and GEMM rate of its backend, its Jacobian-assembly bandwidth and SYRK rate against
them, and its peak device memory; they get a table of their own and the "Targets (issue 4)"
section.  Raw directories from before these fields render as they did.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict

LMTRAIN = 'lmtrain'


def load(raw):
    runs = []
    for name in sorted(os.listdir(raw)):
        if not name.endswith('.jsonl'):
            continue
        workload, variant, tool, rep = name[:-len('.jsonl')].split('__')
        lines = []
        with open(os.path.join(raw, name)) as f:
            for line in f:
                line = line.strip()
                if line.startswith('{'):
                    try:
                        lines.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
        log = os.path.join(raw, name[:-len('.jsonl')] + '.log')
        err = ''
        if os.path.exists(log):
            with open(log, errors='replace') as f:
                err_lines = [l.rstrip() for l in f if l.strip() and 'triton not found' not in l]
            err = ' / '.join(err_lines[-3:])
        result = next((l for l in lines if l.get('type') == 'result'), None)
        if result and result.get('solver') in ('cg', 'dual'):
            # J is stored, not folded into A: the "normal equations" phase holds no SYRK (drivers
            # before 2026-11-22 still divided n²·rows by it).
            result['syrk_gflops'] = result['syrk_gemm_fraction'] = None
        error = next((l for l in lines if l.get('type') == 'error'), None)
        runs.append({'workload': workload, 'variant': variant, 'tool': tool, 'rep': int(rep),
                     'result': result, 'epochs': [l for l in lines if l.get('type') == 'epoch'],
                     'error': (error or {}).get('error') or err or 'no result (see the log)'})
    return runs


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt_time(s):
    if s is None:
        return '–'
    if s < 1e-3:
        return f'{s * 1e6:.0f} µs'
    if s < 1:
        return f'{s * 1e3:.2f} ms'
    return f'{s:.2f} s'


def fmt_loss(x):
    return '–' if x is None else f'{x:.3e}'


def fmt_mem(b):
    return '–' if b is None else f'{b / 2**20:.0f} MiB'


def fmt_bytes(b):
    """Device memory, which for W1 is well under a MiB."""
    if b is None:
        return '–'
    if b < 2**20:
        return f'{b / 2**10:.0f} KiB'
    if b < 2**30:
        return f'{b / 2**20:.1f} MiB'
    return f'{b / 2**30:.2f} GiB'


def fmt_rate(x, unit):
    return '–' if x is None else f'{x:.1f} {unit}'


def fmt_fraction(x):
    return '–' if x is None else f'{100 * x:.0f}%'


def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return '–'
    r = a / b
    return f'{r:.3f} ({b / a:.1f}× faster)' if r < 1 else f'{r:.2f} ({r:.1f}× slower)'


def fmt_spread(s, field, fmt):
    """'median (min–max)' over the repetitions; the median alone for one run."""
    value = fmt(s.get(field))
    lo_hi = (s.get('spread') or {}).get(field)
    if s.get('ok', 0) > 1 and lo_hi and lo_hi[0] != lo_hi[1]:
        return f'{value} ({fmt(lo_hi[0])}–{fmt(lo_hi[1])})'
    return value


def read_marker(raw, name):
    path = os.path.join(raw, name)
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip() or None
    return None


def load_line(raw, workload):
    """The 1-minute load average before each repetition of `workload`."""
    path = os.path.join(raw, 'loadavg.txt')
    if not os.path.exists(path):
        return None
    loads = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[0] == workload:
                loads.append(float(parts[2]))
    if not loads:
        return None
    cores = os.cpu_count() or 0
    return (f'Load average (1 min) before each of the {len(loads)} repetitions: '
            + ', '.join(f'{x:.2f}' for x in loads) + f' (min {min(loads):.2f}, max '
            f'{max(loads):.2f}; {cores} cores).')


def paired_ratios(a, b, field):
    """a[field] / b[field] per repetition present in both (same seed)."""
    out = []
    for rep, ra in (a.get('by_rep') or {}).items():
        rb = (b.get('by_rep') or {}).get(rep)
        if rb and ra.get(field) and rb.get(field):
            out.append(ra[field] / rb[field])
    return out


def tool_order(workload, tools, first=None):
    """The headline (or judged) lmtrain row first for W6, lmtrain's rows before the peers', LM
    peers before first-order ones."""
    def key(t):
        return (t != first if workload == 'W6' else False,
                {'fann-rprop': 0, 'fann-quickprop': 1}.get(t, 2) if workload == 'W6' else 0,
                not t.startswith(LMTRAIN), t != LMTRAIN, t != first,
                not t.startswith('torch-lm') and not t.startswith('fann'), t != 'torch-lm', t)
    return sorted(tools, key=key)


def summarize(runs):
    """(workload, variant, tool) → medians over the measured repetitions."""
    groups = defaultdict(list)
    for r in runs:
        if r['rep'] > 0:
            groups[(r['workload'], r['variant'], r['tool'])].append(r)
    out = {}
    for key, rs in groups.items():
        ok = [r['result'] for r in rs if r['result']]
        s = {'runs': len(rs), 'ok': len(ok), 'errors': [r['error'] for r in rs if not r['result']]}
        for field in ('median_step_s', 'median_epoch_s', 'total_s', 'final_train_loss',
                      'test_loss', 'test_accuracy', 'peak_rss_bytes', 'median_s',
                      'median_jacobian_s', 'median_jtj_s', 'epochs', 'steps', 'params',
                      'peak_device_bytes', 'planned_peak_bytes', 'slice_samples',
                      'median_jacobian_assembly_s', 'jacobian_gbps', 'syrk_gflops',
                      'copy_bytes', 'copy_gbps', 'gemm_n', 'gemm_gflops',
                      'jacobian_copy_fraction', 'syrk_gemm_fraction', 'cholesky_n',
                      'cholesky_s', 'cholesky_graph_s'):
            s[field] = med([o.get(field) for o in ok])
        s['cholesky_graph_refused'] = next(
            (o['cholesky_graph_refused'] for o in ok if o.get('cholesky_graph_refused')), None)
        # The spread over the repetitions of the figures the tables show.
        s['spread'] = {}
        for field in ('median_step_s', 'median_epoch_s', 'final_train_loss', 'test_loss', 'epochs',
                      'median_s', 'median_jtj_s', 'test_accuracy'):
            vals = [o[field] for o in ok if o.get(field) is not None]
            s['spread'][field] = (min(vals), max(vals)) if vals else None
        s['by_rep'] = {r['rep']: r['result'] for r in rs if r['result']}
        s['device'] = ok[0].get('device') if ok else None
        s['device_kind'] = ok[0].get('device_kind') if ok else None
        s['precision'] = ok[0].get('precision') if ok else None
        s['roofline_error'] = next((o['roofline_error'] for o in ok if o.get('roofline_error')),
                                   None)
        s['step_floor_s'] = med([o.get('step_floor_s') for o in ok])
        for table in ('phases', 'phases_per_step', 'floors_per_step'):
            s[table] = None
            if ok and ok[0].get(table):
                s[table] = {k: med([(o.get(table) or {}).get(k) for o in ok])
                            for k in ok[0][table]}
        s['termination'] = ', '.join(sorted({o.get('termination', '?') for o in ok})) if ok else None
        # Solves per accepted step (lmtrain: accepted + rejected + invalid attempts; the peers
        # report attempts per training step).
        s['attempts_per_accepted'] = med([
            (o['accepted'] + o.get('rejected', 0) + o.get('invalid', 0)) / o['accepted']
            for o in ok if o.get('accepted')])
        s['time_to_loss'] = {t: med([time_to_loss(r['epochs'], t) for r in rs if r['result']])
                             for t in LOSS_TARGETS}
        out[key] = s
    return out


LOSS_TARGETS = (1e-5, 1e-6, 1e-7)


def time_to_loss(epochs, target):
    """Wall time at the end of the first epoch whose training loss is at or below `target`
    (None: never reached)."""
    for e in epochs:
        if e.get('train_loss') is not None and e['train_loss'] <= target:
            return e['elapsed']
    return None


def time_to_loss_table(workload, summary, variants, lines):
    """Time to reach each training-loss target: the median over the repetitions that reached it,
    and how many did."""
    tools = sorted({t for (w, v, t) in summary if w == workload}, key=lambda t: (t != LMTRAIN, t))
    head = ('| set | tool | attempts per accepted step | '
            + ' | '.join(f'time to {t:.0e}' for t in LOSS_TARGETS) + ' |')
    lines += ['', f'Time to training loss ({workload}; "–": not reached in the run):', '', head,
              '|' + '---|' * (head.count('|') - 1)]
    for v in variants:
        for t in tools:
            s = summary.get((workload, v, t))
            if not s or not s['ok']:
                continue
            att = '–' if s['attempts_per_accepted'] is None else f"{s['attempts_per_accepted']:.2f}"
            cells = [fmt_time(s['time_to_loss'][x]) if s['time_to_loss'][x] is not None else '–'
                     for x in LOSS_TARGETS]
            lines.append(f"| {v} | {t} | {att} | " + ' | '.join(cells) + ' |')


def training_table(workload, summary, variants, lines, raw=None):
    first = read_marker(raw, f'{workload}.headline' if workload == 'W6' else f'{workload}.pair') \
        if raw else None
    tools = tool_order(workload, {t for (w, v, t) in summary if w == workload}, first)
    classification = any(summary[k].get('test_accuracy') is not None for k in summary
                         if k[0] == workload)
    # W6 compares test error at equal wall-clock budget: an LM step and an RPROP epoch are not the
    # same unit of work, so its ratio is the test MSE against FANN RPROP instead of a time ratio.
    budgeted = workload == 'W6'
    ref_tool = first if first and not budgeted else LMTRAIN
    ratio_head = ('test MSE / fann-rprop | wins vs fann-rprop |' if budgeted
                  else f'step {ref_tool}/peer | epoch {ref_tool}/peer |')
    head = ('| set | tool | runs | time/step | time/epoch | epochs | train loss | test loss | '
            + ('test acc. | ' if classification else '') + 'peak RSS | ' + ratio_head)
    lines += [head, '|' + '---|' * (head.count('|') - 1)]
    for v in variants:
        lm = summary.get((workload, v, ref_tool))
        for t in tools:
            s = summary.get((workload, v, t))
            if not s:
                continue
            if s['ok'] == 0:
                err = s['errors'][0] if s['errors'] else 'failed'
                lines.append(f'| {v} | {t} | **failed** | {err[:300]} |'
                             + ' |' * (head.count('|') - 5))
                continue
            acc = ''
            if classification:
                acc = '–' if s['test_accuracy'] is None else f"{100 * s['test_accuracy']:.2f}%"
                span = s['spread'].get('test_accuracy')
                if span and s['ok'] > 1:  # the seeds' spread: each repetition is one seed
                    acc += f" ({100 * span[0]:.1f}–{100 * span[1]:.1f}%)"
                acc += ' | '
            # Step ratios against LM peers only: an Adam or L-BFGS step is another unit of work.
            peer = t.startswith('torch-lm') or t.startswith('torch-jac') or (
                not t.startswith(LMTRAIN) and not t.startswith('torch-'))
            if budgeted:
                ref = summary.get((workload, v, 'fann-rprop'))
                if t != 'fann-rprop' and ref and ref['ok'] and s['test_loss'] and ref['test_loss']:
                    per_seed = paired_ratios(s, ref, 'test_loss')
                    wins = sum(1 for r in per_seed if r < 1)
                    ratios = f"{s['test_loss'] / ref['test_loss']:.2f} | {wins} of {len(per_seed)} |"
                else:
                    ratios = ' | |'
            else:
                r_step = fmt_ratio(lm['median_step_s'], s['median_step_s']) if peer and lm and lm['ok'] else ''
                r_epoch = fmt_ratio(lm['median_epoch_s'], s['median_epoch_s']) if peer and lm and lm['ok'] else ''
                ratios = f'{r_step} | {r_epoch} |'
            fail_note = f" ({s['runs'] - s['ok']} failed)" if s['ok'] < s['runs'] else ''
            epochs = fmt_spread(s, 'epochs', lambda x: '–' if x is None else f'{x:.0f}')
            name = f'**{t}**' if t == first else t
            lines.append(
                f"| {v} | {name} | {s['ok']}{fail_note} | {fmt_spread(s, 'median_step_s', fmt_time)} | "
                f"{fmt_spread(s, 'median_epoch_s', fmt_time)} | {epochs} | "
                f"{fmt_spread(s, 'final_train_loss', fmt_loss)} | "
                f"{fmt_spread(s, 'test_loss', fmt_loss)} | {acc}"
                f"{fmt_mem(s['peak_rss_bytes'])} | {ratios}")


def fastest_peer(summary, workload, variant):
    """The torch-levenberg-marquardt solver row with the lowest median step time."""
    rows = [(t, s) for (w, v, t), s in summary.items()
            if w == workload and v == variant and t.startswith('torch-lm') and s['ok']
            and s['median_step_s']]
    return min(rows, key=lambda ts: ts[1]['median_step_s']) if rows else (None, None)


def comparison_table(workload, summary, variants, lines, raw):
    """W1/W2: lmtrain's rows against each torch-levenberg-marquardt solver, with the speed-up per
    paired repetition (same seed) and the final training losses."""
    pair = read_marker(raw, f'{workload}.pair')
    if not pair:
        return
    rows = []
    for v in variants:
        for lm_tool in (pair, LMTRAIN):
            lm = summary.get((workload, v, lm_tool))
            if not (lm and lm['ok']):
                continue
            peers = sorted(t for (w, vv, t) in summary if w == workload and vv == v
                           and t.startswith('torch-lm'))
            for t in peers:
                p = summary[(workload, v, t)]
                if not p['ok']:
                    continue
                per_rep = paired_ratios(p, lm, 'median_step_s')
                spread = (f' ({min(per_rep):.1f}–{max(per_rep):.1f})'
                          if len(per_rep) > 1 else '')
                speed = p['median_step_s'] / lm['median_step_s']
                loss_ok = lm['final_train_loss'] <= p['final_train_loss']
                rows.append(f"| {v} | {lm_tool} | {t} | {speed:.1f}×{spread} | "
                            f"{fmt_loss(lm['final_train_loss'])} vs {fmt_loss(p['final_train_loss'])} "
                            f"| {'yes' if loss_ok else 'no'} |")
    if rows:
        lines += ['', f'Speed-up per LM step ({workload}): peer step / lmtrain step, the ratio of the '
                  'medians, with the min–max of the per-repetition ratios (same seed) in brackets; '
                  + (f'**{pair}** runs in the peer\'s precision (float32), **lmtrain** is lmtrain as '
                   'shipped (precision auto):' if workload == 'W5' else
                   f'**{pair}** damps as the peer does, **lmtrain** is lmtrain as shipped:'), '',
                  '| set | lmtrain row | peer | speed-up per step | final train MSE (medians) | '
                  'lmtrain ≤ peer |', '|---|---|---|---|---|---|'] + rows


def jacobian_table(summary, lines):
    variants = sorted({v for (w, v, t) in summary if w == 'W3'},
                      key=lambda v: [int(x) for x in re.findall(r'\d+', v)])
    tools = sorted({t for (w, v, t) in summary if w == 'W3'}, key=lambda t: (t != LMTRAIN, t))
    head = ('| config (width-depth-samples) | n | tool | JᵀJ product | J + JᵀJ | J | JᵀJ | peak RSS '
            '| lmtrain/peer |')
    lines += [head, '|---|---|---|---|---|---|---|---|---|']
    products = {LMTRAIN: 'SYRK, one triangle', 'torch-jacrev-syrk': 'numpy SYRK (one triangle)'}
    for v in variants:
        lm = summary.get(('W3', v, LMTRAIN))
        for t in tools:
            s = summary.get(('W3', v, t))
            if not s:
                continue
            if s['ok'] == 0:
                err = s['errors'][0] if s['errors'] else 'failed'
                lines.append(f'| {v} | | {t} | | **failed**: {err[:200]} | | | | |')
                continue
            r = fmt_ratio(lm['median_s'], s['median_s']) if t != LMTRAIN and lm and lm['ok'] else ''
            product = products.get(t, 'GEMM J.T @ J (full)')
            lines.append(f"| {v} | {s['params']:.0f} | {t} | {product} | {fmt_time(s['median_s'])} | "
                         f"{fmt_time(s['median_jacobian_s'])} | {fmt_time(s['median_jtj_s'])} | "
                         f"{fmt_mem(s['peak_rss_bytes'])} | {r} |")


def has_roofline(s):
    return s is not None and any(s.get(f) is not None for f in
                                 ('copy_gbps', 'jacobian_gbps', 'peak_device_bytes'))


def fmt_gemm(s):
    if s.get('gemm_gflops') is None:
        return '–'
    return f"{s['gemm_gflops']:.1f} (n = {s['gemm_n']:.0f})"


def roofline_error_notes(rows, lines):
    for label, s in rows:
        if s.get('roofline_error'):
            lines.append(f"* {label}: roofline not measured: {s['roofline_error'][:300]}")


def jacobian_roofline_table(summary, lines):
    """lmtrain's W3 builds against the device roofline measured in the same process."""
    variants = sorted({v for (w, v, t) in summary if w == 'W3' and t == LMTRAIN},
                      key=lambda v: [int(x) for x in re.findall(r'\d+', v)])
    rows = [(v, summary[('W3', v, LMTRAIN)]) for v in variants]
    rows = [(v, s) for v, s in rows if s['ok'] and has_roofline(s)]
    if not rows:
        return
    lines += ['', 'lmtrain against the device roofline (issue 4; median over the repetitions of '
              'one process per configuration; the copy and GEMM figures are measured in that '
              'process on the same backend). J assembly: bytes of J written / the "jacobian" '
              'phase (reads not counted: a lower bound); SYRK: n(n+1)·rows flops / the "normal '
              'equations" phase (which also holds the GEMV Jᵀr: a lower bound).', '',
              '| config | n | slice | J assembly | J GB/s | copy GB/s | J / copy | SYRK + GEMV '
              '| SYRK GFLOP/s | GEMM GFLOP/s | SYRK / GEMM | peak device memory | planned peak |',
              '|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for v, s in rows:
        slice_ = '–' if s['slice_samples'] is None else f"{s['slice_samples']:.0f}"
        lines.append(
            f"| {v} | {s['params']:.0f} | {slice_} | {fmt_time(s['median_jacobian_assembly_s'])} | "
            f"{fmt_rate(s['jacobian_gbps'], 'GB/s')} | {fmt_rate(s['copy_gbps'], 'GB/s')} | "
            f"{fmt_fraction(s['jacobian_copy_fraction'])} | {fmt_time(s['median_jtj_s'])} | "
            f"{fmt_rate(s['syrk_gflops'], 'GFLOP/s')} | {fmt_gemm(s)} | "
            f"{fmt_fraction(s['syrk_gemm_fraction'])} | {fmt_bytes(s['peak_device_bytes'])} | "
            f"{fmt_bytes(s['planned_peak_bytes'])} |")
    roofline_error_notes(rows, lines)


def device_table(workload, summary, variants, lines):
    """Peak device memory and the roofline figures of every lmtrain variant of a training run."""
    tools = sorted({t for (w, v, t) in summary if w == workload and t.startswith(LMTRAIN)},
                   key=lambda t: (t != LMTRAIN, t))
    rows = [(v, t, summary.get((workload, v, t))) for v in variants for t in tools]
    rows = [(v, t, s) for v, t, s in rows if s and s['ok'] and has_roofline(s)]
    if not rows:
        return
    lines += ['', f'lmtrain\'s device memory and the device roofline ({workload}, median over the '
              'repetitions; issue 4). Peak device memory: the most lmtrain held on the device '
              'during fit (`Summary::peak_device_bytes`), against the memory plan\'s figure for '
              'the LM step. J assembly and SYRK: the run\'s rows of J (steps × batch) over its '
              '"jacobian" and "normal equations" phase totals, as in W3.', '',
              '| set | tool | peak device memory | planned peak (step) | J GB/s | copy GB/s | '
              'J / copy | SYRK GFLOP/s | GEMM GFLOP/s | SYRK / GEMM |',
              '|---|---|---|---|---|---|---|---|---|---|']
    for v, t, s in rows:
        lines.append(
            f"| {v} | {t} | {fmt_bytes(s['peak_device_bytes'])} | {fmt_bytes(s['planned_peak_bytes'])} | "
            f"{fmt_rate(s['jacobian_gbps'], 'GB/s')} | {fmt_rate(s['copy_gbps'], 'GB/s')} | "
            f"{fmt_fraction(s['jacobian_copy_fraction'])} | "
            f"{fmt_rate(s['syrk_gflops'], 'GFLOP/s')} | {fmt_gemm(s)} | "
            f"{fmt_fraction(s['syrk_gemm_fraction'])} |")
    roofline_error_notes([(f'{v} {t}', s) for v, t, s in rows], lines)


def phase_table(workload, summary, variants, lines):
    """Phase times of every lmtrain variant (lmtrain, lmtrain-valstop, lmtrain-ce, …)."""
    tools = sorted({t for (w, v, t) in summary if w == workload and t.startswith(LMTRAIN)},
                   key=lambda t: (t != LMTRAIN, t))
    rows = [(v, t, summary.get((workload, v, t))) for v in variants for t in tools]
    rows = [(v, t, s) for v, t, s in rows if s and s.get('phases')]
    if not rows:
        return
    phases = list(rows[0][2]['phases'])
    lines += ['', f'Where lmtrain\'s time goes ({workload}, seconds per run, median; from '
              '`Summary::times`):', '',
              '| set | tool | ' + ' | '.join(phases) + ' |', '|---|---|' + '---|' * len(phases)]
    for v, t, s in rows:
        lines.append(f'| {v} | {t} | '
                     + ' | '.join('–' if s['phases'].get(p) is None else f"{s['phases'][p]:.3f}"
                                  for p in phases) + ' |')
    per_step = [(v, t, s) for v, t, s in rows if s.get('phases_per_step')]
    # A row with floors has its per-step times in the floor table below; the per-step table
    # repeats only the others (it used to repeat every row, the same digits for W1's 1 000 steps).
    unfloored = [(v, t, s) for v, t, s in per_step if not s.get('floors_per_step')]
    if unfloored:
        lines += ['', f'Per LM step ({workload}, milliseconds: each phase\'s median over the '
                  'steps the median step time is taken over — in results made before 2026-11-27 '
                  'the mean, total / steps — median over the repetitions; "epoch evaluation" is '
                  'per-epoch work spread over the steps):', '',
                  '| set | tool | ' + ' | '.join(phases) + ' |', '|---|---|' + '---|' * len(phases)]
        for v, t, s in unfloored:
            cells = [s['phases_per_step'].get(p) for p in phases]
            lines.append(f'| {v} | {t} | ' + ' | '.join(
                '–' if c is None else f'{1e3 * c:.3f}' for c in cells) + ' |')
    floor_table(workload, [(v, t, s) for v, t, s in per_step if s.get('floors_per_step')], lines)


def floor_table(workload, rows, lines):
    """Each phase per step beside its floor (lmtrain_workloads' phase_floors_json) and the ratio."""
    if not rows:
        return
    lines += ['', f'Each phase against its floor ({workload}, per LM step: the phase\'s median '
              'over the steps, the mean in results made before 2026-11-27; floor: the least time '
              'the phase could take at the rates measured in the same process — products at the '
              'square-GEMM rate (A\'s and the Cholesky\'s in the system\'s precision), the '
              'Cholesky at least one factorization and solve of the run\'s n timed alone, '
              'activations at the rate of the backend\'s own activation loop on '
              'a large buffer, J\'s bytes at the copy bandwidth or, where more, its products at '
              'the GEMM rate (convolutions); see `phase_floors_json` in '
              '`bench/lmtrain_workloads.cpp`). "step" compares the median step time with the sum '
              'of the floors.', '',
              '| set | tool | phase | time | floor | time / floor |', '|---|---|---|---|---|---|']
    for v, t, s in rows:
        for p, floor in s['floors_per_step'].items():
            time = s['phases_per_step'].get(p)
            if not floor or time is None:
                continue
            lines.append(f'| {v} | {t} | {p} | {fmt_time(time)} | {fmt_time(floor)} | '
                         f'{time / floor:.1f} |')
        if s.get('step_floor_s') and s.get('median_step_s'):
            lines.append(f"| {v} | {t} | **step** | {fmt_time(s['median_step_s'])} | "
                         f"{fmt_time(s['step_floor_s'])} | "
                         f"{s['median_step_s'] / s['step_floor_s']:.1f} |")
    # The Cholesky timed alone, eagerly and replayed from one recorded graph (issue 36 item 3).
    graphs = []
    for v, t, s in rows:
        if s.get('cholesky_graph_s') is not None and s.get('cholesky_s'):
            graphs.append(f"* {v}, {t}: the Cholesky and solve of n = {s['cholesky_n']:.0f} "
                          f"{fmt_time(s['cholesky_s'])} queued call by call, "
                          f"{fmt_time(s['cholesky_graph_s'])} replayed as one graph "
                          f"({s['cholesky_s'] / max(s['cholesky_graph_s'], 1e-12):.2f}×)")
        elif s.get('cholesky_graph_refused'):
            graphs.append(f"* {v}, {t}: the Cholesky and solve could not be recorded as a graph: "
                          f"{s['cholesky_graph_refused']}")
    if graphs:
        lines += [''] + graphs


def chart(workload, runs, out_png, raw):
    """Training loss against wall time, rep 1 of every tool (one panel per set for W6)."""
    if not shutil.which('gnuplot'):
        return 'gnuplot not installed: no chart'
    sel = [r for r in runs if r['workload'] == workload and r['rep'] == 1 and r['epochs']]
    if not sel:
        return 'no per-epoch data: no chart'
    variants = sorted({r['variant'] for r in sel})
    data_files = []
    for r in sel:
        path = os.path.join(raw, f"curve__{workload}__{r['variant']}__{r['tool']}.dat")
        with open(path, 'w') as f:
            for e in r['epochs']:
                if e.get('train_loss') is not None and e['train_loss'] > 0:
                    f.write(f"{e['elapsed']} {e['train_loss']}\n")
        data_files.append((r['variant'], r['tool'], path))
    ylabel = 'training cross-entropy' if workload == 'W4' else 'training MSE'
    yformat = '%g' if workload == 'W4' else '%.0e'
    script = [f"set terminal pngcairo size {640 * min(3, len(variants))},"
              f"{420 * ((len(variants) + 2) // 3)} font 'DejaVu Sans,10'",
              f"set output '{out_png}'", "set logscale y", f"set format y '{yformat}'",
              "set xlabel 'wall time (s)'", f"set ylabel '{ylabel}'", "set grid",
              "set key top right"]
    if len(variants) > 1:
        script.append(f"set multiplot layout {(len(variants) + 2) // 3},{min(3, len(variants))}")
    for v in variants:
        series = [(t, p) for (vv, t, p) in data_files if vv == v]
        series.sort(key=lambda x: (x[0] != LMTRAIN, x[0]))
        script.append(f"set title '{workload} {v}: training loss vs wall time'")
        plots = [f"'{p}' using 1:2 with linespoints pointsize 0.5 title '{t}'" for t, p in series]
        script.append('plot ' + ', '.join(plots))
    if len(variants) > 1:
        script.append('unset multiplot')
    gp = os.path.join(raw, f'chart__{workload}.gp')
    with open(gp, 'w') as f:
        f.write('\n'.join(script) + '\n')
    res = subprocess.run(['gnuplot', gp], capture_output=True, text=True)
    return None if res.returncode == 0 else f'gnuplot failed: {res.stderr.strip()[:300]}'


def jacobian_chart(summary, out_png, raw):
    if not shutil.which('gnuplot'):
        return 'gnuplot not installed: no chart'
    series = defaultdict(list)
    for (w, v, t), s in summary.items():
        if w != 'W3' or not s['ok']:
            continue
        width, depth, samples = (int(x) for x in re.findall(r'\d+', v))
        series[(t, width, depth)].append((samples, s['median_s']))
    if not series:
        return 'no W3 results: no chart'
    plots = []
    for (t, width, depth), pts in sorted(series.items()):
        path = os.path.join(raw, f'curve__W3__{t}__w{width}-d{depth}.dat')
        with open(path, 'w') as f:
            for samples, sec in sorted(pts):
                f.write(f'{samples} {sec}\n')
        plots.append(f"'{path}' using 1:2 with linespoints title '{t} w={width} d={depth}'")
    gp = os.path.join(raw, 'chart__W3.gp')
    with open(gp, 'w') as f:
        f.write('\n'.join([
            "set terminal pngcairo size 900,600 font 'DejaVu Sans,10'", f"set output '{out_png}'",
            'set logscale xy', "set xlabel 'samples (residual rows)'",
            "set ylabel 'seconds for J and JᵀJ'", 'set grid', 'set key top left',
            "set title 'W3: Jacobian + JᵀJ time vs samples'", 'plot ' + ', '.join(plots)]) + '\n')
    res = subprocess.run(['gnuplot', gp], capture_output=True, text=True)
    return None if res.returncode == 0 else f'gnuplot failed: {res.stderr.strip()[:300]}'


def targets(summary, order, raw):
    """The targets of issue 7, checked against this run's medians.  W1/W2 are judged on the
    lmtrain row that damps as the peer does (RAW/W.pair) against the fastest solver of
    torch-levenberg-marquardt; W6 on the lmtrain row chosen before the run (RAW/W6.headline)
    against FANN RPROP and quickprop on the same split.  Other rows are listed, not counted."""
    out = ['## Targets (issue 7)', '']
    for w in ('W1', 'W2'):
        if w not in order:
            continue
        variant = 'sinc-61' if w == 'W1' else 'sinc-769'
        pair = read_marker(raw, f'{w}.pair') or LMTRAIN
        lm = summary.get((w, variant, pair))
        peer_tool, peer = fastest_peer(summary, w, variant)
        if not (lm and peer and lm['ok']):
            out.append(f'* {w}: not evaluated (lmtrain or torch-levenberg-marquardt has no result).')
            continue
        speed = peer['median_step_s'] / lm['median_step_s']
        per_rep = paired_ratios(peer, lm, 'median_step_s')
        spread = f', {min(per_rep):.1f}–{max(per_rep):.1f}× per repetition' if len(per_rep) > 1 else ''
        loss_ok = lm['final_train_loss'] <= peer['final_train_loss']
        met = speed >= 10 and loss_ok
        out.append(
            f"* {w}: lmtrain ≥ 10× faster per LM step than torch-levenberg-marquardt at equal or "
            f"lower final loss, with the same damping (`{pair}` against the fastest peer solver, "
            f"`{peer_tool}`) — **{'met' if met else 'not met'}**: {speed:.1f}× "
            f"({fmt_time(lm['median_step_s'])} vs {fmt_time(peer['median_step_s'])} per step"
            f"{spread}), final training MSE {fmt_loss(lm['final_train_loss'])} vs "
            f"{fmt_loss(peer['final_train_loss'])} (medians of {lm['ok']} and {peer['ok']} runs).")
    if 'W6' in order:
        headline = read_marker(raw, 'W6.headline') or LMTRAIN
        sets = sorted({v for (w, v, t) in summary if w == 'W6'})
        lm_tools = sorted({t for (w, v, t) in summary if w == 'W6' and t.startswith(LMTRAIN)},
                          key=lambda t: (t != headline, t))
        for tool in lm_tools:
            for peer_tool in ('fann-rprop', 'fann-quickprop'):
                better, compared, seeds_won, seeds = [], 0, 0, 0
                for v in sets:
                    lm, peer = summary.get(('W6', v, tool)), summary.get(('W6', v, peer_tool))
                    if lm and peer and lm['ok'] and peer['ok']:
                        compared += 1
                        if lm['test_loss'] < peer['test_loss']:
                            better.append(v)
                        per_seed = paired_ratios(lm, peer, 'test_loss')
                        seeds += len(per_seed)
                        seeds_won += sum(1 for r in per_seed if r < 1)
                if compared == 0:
                    continue
                met = len(better) > compared / 2
                what = (f"lower median test MSE than FANN {peer_tool[5:]} on most sets at the same "
                        f"budget and split — **{'met' if met else 'not met'}**"
                        if tool == headline else
                        f"extra row, not counted: lower median test MSE than FANN {peer_tool[5:]}")
                out.append(
                    f"* W6 ({tool}{', the headline chosen before the run' if tool == headline else ''}): "
                    f"{what}: {len(better)} of {compared}"
                    + (f" ({', '.join(better)})" if better else '')
                    + f"; {seeds_won} of {seeds} (set, seed) pairs.")
                if tool != headline:
                    break  # the extra rows against RPROP only
    return out + [''] if len(out) > 2 else []  # no heading without a target (W3, W4)


JACOBIAN_TARGET = 0.50  # issue 4: Jacobian assembly ≥ 50 % of the measured copy bandwidth
SYRK_TARGET = 0.60      # issue 4: SYRK ≥ 60 % of the measured GEMM rate, for n ≥ 4096
SYRK_TARGET_MIN_N = 4096


def roofline_targets(summary, order, device):
    """Issue 4's targets against the device roofline.  Judged on lmtrain's W3 configurations,
    at the largest sample count of each network (where per-launch costs are amortized; the
    smaller ones are in the table), and on W1/W2 where n qualifies."""
    judged = []  # (label, summary) of the runs that enter the targets
    w3 = [(v, s) for (w, v, t), s in summary.items()
          if w == 'W3' and t == LMTRAIN and s['ok'] and has_roofline(s)]
    largest = {}
    for v, s in w3:
        width, depth, samples = (int(x) for x in re.findall(r'\d+', v))
        if samples > largest.get((width, depth), (0, None))[0]:
            largest[(width, depth)] = (samples, (v, s))
    judged += [('W3 ' + vs[0], vs[1]) for _, (_, vs) in sorted(largest.items())]
    for w in ('W1', 'W2'):
        for (ww, v, t), s in sorted(summary.items()):
            if ww == w and t == LMTRAIN and s['ok'] and has_roofline(s):
                judged.append((f'{w} {v}', s))
    if not any(w in order for w in ('W1', 'W2', 'W3')) or not judged:
        return []
    out = ['## Targets (issue 4: against the device roofline)', '']
    if device != 'cuda':
        out += ['These targets are set for a GPU (`bench/run.sh W1 W2 W3 --device cuda`); on '
                f'this {device} run they are shown for reference only.', '']

    def verdict(name, pairs, target):
        if not pairs:
            return None
        met = all(x >= target for _, x in pairs)
        detail = ', '.join(f'{label} {100 * x:.0f}%' for label, x in pairs)
        return f"{name} — **{'met' if met else 'not met'}**: {detail}."

    jac = [(label, s['jacobian_copy_fraction']) for label, s in judged
           if s.get('jacobian_copy_fraction') is not None and label.startswith('W3')]
    line = verdict(f'* Jacobian assembly ≥ {100 * JACOBIAN_TARGET:.0f}% of the measured copy '
                   'bandwidth (W3, largest s of each network; J bytes written / "jacobian" phase, '
                   'a lower bound)', jac, JACOBIAN_TARGET)
    out.append(line or '* Jacobian assembly ≥ 50% of the copy bandwidth: not evaluated (no W3 '
                       'result with the roofline).')
    syrk = [(label, s['syrk_gemm_fraction']) for label, s in judged
            if s.get('syrk_gemm_fraction') is not None and (s.get('params') or 0) >= SYRK_TARGET_MIN_N]
    line = verdict(f'* SYRK ≥ {100 * SYRK_TARGET:.0f}% of the measured GEMM rate of the same '
                   f'precision for n ≥ {SYRK_TARGET_MIN_N} ("normal equations" phase, with its '
                   'GEMV: a lower bound)', syrk, SYRK_TARGET)
    out.append(line or f'* SYRK ≥ 60% of the GEMM rate for n ≥ {SYRK_TARGET_MIN_N}: not evaluated '
                       f'(no result with n ≥ {SYRK_TARGET_MIN_N} in this run; W3\'s 1-64-64-1, '
                       'n = 4 353, is the grid\'s one).')
    info = [(label, s) for label, s in judged if not label.startswith('W3')]
    if info:
        out.append('* For reference (not judged above: W1/W2 batches are small and n < '
                   f'{SYRK_TARGET_MIN_N}): ' + '; '.join(
                       f"{label}: J {fmt_fraction(s.get('jacobian_copy_fraction'))} of copy, "
                       f"SYRK {fmt_fraction(s.get('syrk_gemm_fraction'))} of GEMM (n = "
                       f"{s['params']:.0f}), peak device memory {fmt_bytes(s.get('peak_device_bytes'))} "
                       f"(planned {fmt_bytes(s.get('planned_peak_bytes'))})" for label, s in info) + '.')
    return out + ['']


DESCRIPTIONS = {
    'W1': 'sinc-61: 20 000 points, 1-20-1 tanh (61 parameters), batch 1 000, float32',
    'W2': 'sinc-769: 100 000 points, 1-256-1 tanh (769 parameters), batch 10 000, float32',
    'W3': 'Jacobian + JᵀJ only, 1-w-…-w-1 tanh, x = linspace(−1, 1, s), float32',
    'W4': 'fashion-cnn: Fashion-MNIST subset, SimpleCNN (1 026 parameters), batch 2 000, '
          'cross-entropy, float32',
    'W5': 'dense-large: 8-W-W-1 tanh on x ∈ R⁸, full batch, the normal equations at scale',
    'W6': 'FANN sets, 1 hidden layer of 16 tanh units, linear outputs, full batch, float32, '
          'same wall-clock budget for every tool',
    'W7': "sinc-769-full: W2's data and network, full batch of 100 000 (cuPyLMA's "
          'examples/curve_fitting), float32 model; lmtrain: precision auto (a float64 system '
          'for 100 000 rows per A), lmtrain-float32: float32 throughout',
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('raw')
    ap.add_argument('out_md')
    ap.add_argument('--title', default='lmtrain vs peers')
    ap.add_argument('--workloads', default='')
    ap.add_argument('--preamble', default='', help='file whose text goes under the title')
    ap.add_argument('--device', choices=('cpu', 'cuda'), default=None,
                    help="the run's device (default: from lmtrain's results, else cpu)")
    args = ap.parse_args()
    runs = load(args.raw)
    summary = summarize(runs)
    device = args.device or ('cuda' if any(s.get('device_kind') == 'cuda'
                                           for s in summary.values()) else 'cpu')
    order = args.workloads.split() or sorted({r['workload'] for r in runs})
    out_dir = os.path.dirname(os.path.abspath(args.out_md))
    stem = os.path.basename(args.out_md)[:-3]
    lines = [f'# {args.title}', '']
    if args.preamble and os.path.exists(args.preamble):
        with open(args.preamble) as f:
            lines += [f.read().rstrip(), '']
    for w in order:
        lines += [f'## {w} — {DESCRIPTIONS.get(w, "")}', '']
        notice = os.path.join(args.raw, f'{w}.notice')
        if os.path.exists(notice):
            with open(notice) as f:
                lines += [f.read().strip(), '']
            continue
        note = os.path.join(args.raw, f'{w}.note')
        if os.path.exists(note):
            with open(note) as f:
                lines += [f.read().strip(), '']
        load_text = load_line(args.raw, w)
        if load_text:
            lines += [load_text, '']
        variants = sorted({v for (ww, v, t) in summary if ww == w})
        if not variants:
            lines += ['No runs.', '']
            continue
        if w == 'W3':
            jacobian_table(summary, lines)
            jacobian_roofline_table(summary, lines)
            png = f'{stem}-W3.png'
            err = jacobian_chart(summary, os.path.join(out_dir, png), args.raw)
        else:
            training_table(w, summary, variants, lines, args.raw)
            if w in ('W1', 'W2', 'W5'):
                comparison_table(w, summary, variants, lines, args.raw)
            if w in ('W1', 'W2', 'W7'):
                time_to_loss_table(w, summary, variants, lines)
            device_table(w, summary, variants, lines)
            phase_table(w, summary, variants, lines)
            png = f'{stem}-{w}.png'
            err = chart(w, runs, os.path.join(out_dir, png), args.raw)
        lines += ['', f'![{w}]({png})' if err is None else f'(chart: {err})', '']
    lines += targets(summary, order, args.raw)
    lines += roofline_targets(summary, order, device)
    with open(args.out_md, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print(f'report.py: wrote {args.out_md}')


if __name__ == '__main__':
    sys.exit(main())
