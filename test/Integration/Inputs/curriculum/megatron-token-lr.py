#!/usr/bin/env python3
"""Megatron-DeepSpeed's token-based learning rate, replayed over a run.

usage: megatron-token-lr.py RUN.jsonl --max-lr X --min-lr X --style S
           --warmup-iters W --decay-tokens D [--warmup-tokens WT]
           --global-batch B --train-iters N [--train-tokens T]
           (--curriculum MIN,MAX,STEPS,DIFFICULTY_STEP | --seq-length L)
           [--tol E]

Written from Megatron-DeepSpeed (megatron/optimizer_param_scheduler.py's
OptimizerParamScheduler.get_lr and step, megatron/training.py's train loop)
and DeepSpeed's fixed_linear curriculum schedule, not from dsc: the
scheduler counts steps in samples (increment = global batch), is stepped
inside train_step after the optimizer, reading args.consumed_train_tokens
before the step's tokens are added, and the loop runs while iteration <
train_iters and consumed_train_tokens < train_tokens. The learning rate an
iteration trains with is the one the previous step() set.

Checks every record of RUN.jsonl (a resumed run's records start later):
its curriculum_seqlen (with --curriculum), consumed_tokens and
learning_rate (within --tol),
and that the records end where Megatron-DeepSpeed's loop ends. Prints
"OK ..." or exits 1 naming the first difference.
"""

import argparse
import json
import math
import sys


class Scheduler:
    """OptimizerParamScheduler's learning rate (no weight decay)."""

    def __init__(self, max_lr, min_lr, warmup_steps, decay_steps, style,
                 decay_tokens, warmup_tokens):
        self.max_lr = float(max_lr)
        self.min_lr = min_lr
        self.lr_warmup_steps = warmup_steps
        self.num_steps = 0
        self.lr_decay_steps = decay_steps
        self.lr_decay_tokens = decay_tokens
        self.num_tokens = 0
        self.lr_warmup_tokens = warmup_tokens
        self.lr_decay_style = style
        self.lr = None
        self.step(0, token_num=0)

    def get_lr(self):
        if self.lr_warmup_tokens is None:
            if self.lr_warmup_steps > 0 and \
                    self.num_steps <= self.lr_warmup_steps:
                if self.num_steps == self.lr_warmup_steps and \
                        self.lr_decay_tokens is not None:
                    self.lr_warmup_tokens = self.num_tokens
                return self.max_lr * float(self.num_steps) / \
                    float(self.lr_warmup_steps)
        else:
            if self.lr_warmup_tokens > 0 and \
                    self.num_tokens <= self.lr_warmup_tokens:
                return self.max_lr * float(self.num_tokens) / \
                    float(self.lr_warmup_tokens)
        if self.lr_decay_style == 'constant':
            return self.max_lr
        if self.lr_decay_tokens is None:
            if self.num_steps > self.lr_decay_steps:
                return self.min_lr
        else:
            if self.num_tokens > self.lr_decay_tokens:
                return self.min_lr
        if self.lr_decay_tokens is None:
            num_steps_ = self.num_steps - self.lr_warmup_steps
            decay_steps_ = self.lr_decay_steps - self.lr_warmup_steps
            decay_ratio = float(num_steps_) / float(decay_steps_)
        else:
            num_tokens_ = self.num_tokens - self.lr_warmup_tokens
            decay_tokens_ = self.lr_decay_tokens - self.lr_warmup_tokens
            decay_ratio = float(num_tokens_) / float(decay_tokens_)
        assert 0.0 <= decay_ratio <= 1.0
        delta_lr = self.max_lr - self.min_lr
        if self.lr_decay_style == 'linear':
            coeff = 1.0 - decay_ratio
        elif self.lr_decay_style == 'cosine':
            coeff = 0.5 * (math.cos(math.pi * decay_ratio) + 1.0)
        else:
            raise Exception(self.lr_decay_style)
        return self.min_lr + coeff * delta_lr

    def step(self, increment, token_num):
        self.num_tokens = token_num
        self.num_steps += increment
        self.lr = self.get_lr()


def seqlen(step, lo, hi, total, diff_step):
    """DeepSpeed's fixed_linear curriculum difficulty at `step`."""
    d = math.floor((float(step) / total) * (hi - lo) + lo)
    d -= d % diff_step
    d = max(d, math.ceil(lo / diff_step) * diff_step)
    return min(d, hi)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('run')
    ap.add_argument('--max-lr', type=float, required=True)
    ap.add_argument('--min-lr', type=float, required=True)
    ap.add_argument('--style', required=True)
    ap.add_argument('--warmup-iters', type=int, required=True)
    ap.add_argument('--decay-tokens', type=int, required=True)
    ap.add_argument('--warmup-tokens', type=int, default=None)
    ap.add_argument('--global-batch', type=int, required=True)
    ap.add_argument('--train-iters', type=int, required=True)
    ap.add_argument('--train-tokens', type=int, default=None)
    ap.add_argument('--curriculum')
    ap.add_argument('--seq-length', type=int)
    ap.add_argument('--tol', type=float, default=1e-7)
    a = ap.parse_args()
    if (a.curriculum is None) == (a.seq_length is None):
        sys.exit('give one of --curriculum and --seq-length')
    if a.curriculum:
        lo, hi, total, diff_step = (int(v) for v in a.curriculum.split(','))

    records = {}
    with open(a.run) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                records[r['iteration']] = r

    gbs = a.global_batch
    sched = Scheduler(a.max_lr, a.min_lr, a.warmup_iters * gbs,
                      a.train_iters * gbs, a.style, a.decay_tokens,
                      a.warmup_tokens)
    iteration, consumed_tokens, worst, checked = 0, 0, 0.0, 0
    while iteration < a.train_iters and (a.train_tokens is None or
                                         consumed_tokens < a.train_tokens):
        # train_step: the optimizer runs at the current rate, then the
        # scheduler steps with the tokens consumed before this step.
        length = a.seq_length or seqlen(iteration + 1, lo, hi, total,
                                        diff_step)
        lr_used = sched.lr
        sched.step(gbs, token_num=consumed_tokens)
        iteration += 1
        consumed_tokens += gbs * length
        r = records.pop(iteration, None)
        if r is None:
            if checked:
                sys.exit(f'FAIL: no record of iteration {iteration}')
            continue
        if a.curriculum and r['curriculum_seqlen'] != length:
            sys.exit(f'FAIL: iteration {iteration}: curriculum_seqlen '
                     f'{r["curriculum_seqlen"]}, DeepSpeed {length}')
        if r['consumed_tokens'] != consumed_tokens:
            sys.exit(f'FAIL: iteration {iteration}: consumed_tokens '
                     f'{r["consumed_tokens"]}, Megatron-DeepSpeed '
                     f'{consumed_tokens}')
        diff = abs(r['learning_rate'] - lr_used)
        if diff > a.tol:
            sys.exit(f'FAIL: iteration {iteration}: learning_rate '
                     f'{r["learning_rate"]!r}, Megatron-DeepSpeed '
                     f'{lr_used!r} (|diff| {diff:.3g} > {a.tol})')
        worst = max(worst, diff)
        checked += 1
    if records:
        sys.exit(f'FAIL: records past the end of Megatron-DeepSpeed\'s loop '
                 f'(iteration {iteration}): {sorted(records)}')
    print(f'OK {checked} iterations, last {iteration}, {consumed_tokens} '
          f'tokens, max |lr difference| {worst:.2g}')


if __name__ == '__main__':
    main()
