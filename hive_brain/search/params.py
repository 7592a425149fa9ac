"""Every number that ranks or abstains, in one place. Fusion weights are tuned on LoCoMo
(``benchmarks/locomo.py``; fast experiments with ``benchmarks/tune_locomo.py``), abstention
thresholds on ``benchmarks/smallvault.py`` (answerable vs off-topic questions at 20 to 2,000 notes, the
tune half only; the curve and the chosen point are in docs/benchmarks.md): change them only with
before/after numbers. Counts are stored as floats like the rest and read with ``int()``."""

from __future__ import annotations

PARAMS: dict[str, float] = {
    # Candidates
    "pool_window": 60,  # passages dated inside a named time window that become candidates (newest first)
    "passage_rrf_k": 10.0,  # rank fusion of one note's passages: picks the passage shown, feeds `support`
    "background_top": 3,  # semantic floor = mean similarity of the question to its N nearest background texts
    "floor_per_decade": 0.01,  # ... plus this for every tenfold of indexed documents above `floor_ref_docs`
    "floor_ref_docs": 100,
    # Rank fusion of the note rankings
    "rrf_k": 10.0,  # smaller = the top of each list matters more
    "w_lex": 1.0,  # weight of the lexical note ranking
    "w_sem": 1.5,  # weight of the semantic note ranking
    "w_doc": 0.5,  # weight of the whole-note BM25 ranking
    "w_win": 0.5,  # weight of the "dated inside the named window" note ranking (newest first)
    "w_li": 0.0,  # weight of the late-interaction ranking of the top `li_top` candidates (0 = off)
    "li_top": 20,  # candidates the late-interaction second pass looks at
    "li_passages": 2,  # ... and each one's best passages
    # The second model (search/rerank.py, all-MiniLM-L6-v2) over the first pass's top `rr_top` notes:
    # final score = 1/(rrf_k + first-pass rank) + w_rr * its cosine (0 = off). Chosen on the smallvault
    # tune half, checked on the fixture set of benchmarks/scale.py (docs/benchmarks.md).
    "w_rr": 0.4,
    "rr_top": 30,
    # ... in an index of at most `rr_small_docs` passages: 1/(rr_k_small + first-pass rank) + w_rr x its
    # cosine + w_rr_e5_small x e5's cosine (the first pass's word matches mislead most in a small vault;
    # chosen on the smallvault tune half at 29 and 81 notes; at 1,000 notes it lost on the fixture set).
    "rr_small_docs": 200,
    "rr_k_small": 30.0,
    "w_rr_e5_small": 1.0,
    "lex_sum": 0.0,  # note lexical score = best passage + lex_sum * other matching passages
    "sem_second": 0.0,  # note semantic score = best passage + sem_second * second best
    # Score-based fusion added to the rank fusion
    "linear": 0.3,  # weight of score-based fusion (normalised BM25 + semantic) added to the rank fusion
    "lin_sem": 1.0,  # weight of the semantic part inside the score-based fusion
    "lin_doc": 0.5,  # weight of whole-note BM25 inside the score-based fusion
    "support": 0.0,  # bonus per other strong passage (rank-fused)
    "support_passages": 3,  # how many other passages count for `support`
    # Multiplier: coverage of the question's words
    "cov_base": 0.55,  # score multiplier at zero query-term coverage (1.0 at full coverage)
    "cov_need": 0.0,  # coverage at which the multiplier saturates (0 = by question length, below)
    "cov_need_short": 0.4,  # ... for a question of fewer than `cov_long_terms` words
    "cov_need_long": 0.6,  # ... for a longer one: longer questions need proportionally more words present
    "cov_long_terms": 6,
    "w_cov_full": 0.3,  # multiplier bonus at full (rarity-weighted) coverage, not saturating at `cov_need`
    "cov_sem": 0.8,  # how much of the needed coverage the best semantic match can stand in for
    # Multiplier: title, key, aliases, confidence, status, time
    "w_title_cov": 0.25,  # bonus at full coverage of the question by the title's words
    "w_exact_title": 0.3,  # the title is the question, or appears in it
    "exact_title_min_chars": 4,  # shorter titles ("Go") match inside too many questions to count
    "w_key": 0.2,  # the memory key's last part appears in the question
    "w_alias": 0.3,  # an alias appears in the question
    # At full (rarity-weighted) coverage of the question by one of the writer's `questions` (benchmarks/aliasvault.py).
    "w_question": 0.25,
    "conf_base": 0.9,  # multiplier = conf_base + w_conf * confidence
    "w_conf": 0.1,
    "conf_default": 0.8,  # confidence of a note that states none
    "superseded": 0.6,  # multiplier of a superseded version when the question is not about the past
    "window_boost": 0.3,  # multiplier bonus for notes dated inside a time window named in the question
    # Days after a named window that still count as inside it (talk about an event comes later). The
    # named days themselves already rank first through the window rank (strictly inside only); an extra
    # bonus for them measured 0.752 -> 0.751 any@1 on LoCoMo (0.1 and 0.3), so there is none.
    "window_after": 3.0,
    "folder_boost": 0.2,  # hierarchical mode: bonus at the best folder's summed score
    # Multiplier: usage (memory.usage; docs/architecture.md, Usage in ranking): how much answers on this device used the memory
    "w_usage": 0.05,  # bonus at full usage strength: the cap (a note >5% better is never passed)
    "usage_final": 4.0,  # a final-answer use counts as this many retrievals
    "usage_saturate": 20.0,  # weighted uses at which the strength reaches 1 (log-scaled below)
    "usage_half_life_days": 30.0,  # the strength halves for every this many days since the last use
    # Abstention (compared with the values scoreDetails reports: coverage to 3 places, gap to 4)
    "abstain_top": 3,  # the hits whose evidence decides
    # 1: those `abstain_top` count only notes placed by their own text; a note the second model placed by a
    # writer's question is read beside them (abstain.read; aliasvault tune at 2,045 notes hit@1 .900 -> .925)
    "abstain_by_text": 1.0,
    "abstain_cov_lexical": 0.5,  # lexical coverage that answers on its own (lexical search only)
    "abstain_cov": 0.6,  # with semantic evidence: lexical coverage that answers
    "abstain_cov_gap": -0.05,  # ... unless the semantic gap is below this (words of the question, meaning elsewhere)
    "abstain_gap": 0.007,  # semantic gap over background that answers on its own (without late interaction)
    "late_abstain": 1.0,  # 1 = where the model gives token vectors, the gap rule above reads `lateGap` instead
    "abstain_late_gap": 0.025,  # ... against this threshold,
    "abstain_late_cos": 0.012,  # ... or a cosine gap of at least this still answers (without it, 3 of 11
    # answerable paraphrases in the 16-memory test vault abstained; 1 = late interaction alone decides)
    # Where the second model ranked (English questions): its gap over the background decides instead of
    # the e5 and MaxSim gaps above; chosen on the smallvault tune half (docs/benchmarks.md, the curve).
    "abstain_rr_gap": 0.0,
    # ... or a note the second model puts just under that line (this far) that e5 separates by at least
    # `abstain_rr_e5` answers (abstain._near_line_clear_e5; stop 40: aliasvault held 45 notes hit@3 .925 -> 1.0)
    "abstain_rr_near": -0.03,
    "abstain_rr_e5": 0.07,
    "abstain_cov_partial": 0.34,  # ... or this coverage together with
    "abstain_gap_partial": -0.016,  # ... this gap
    "fit_cov": 0.34,  # a hit after the first needs this coverage
    "fit_gap": 0.0,  # ... or this gap
    "w_win_time_only": 10.0,  # added to w_win for a question that asks about its time alone
    "time_only_terms": 1,  # a question with at most this many words besides its time phrase asks about a time
    # The asking agent's alternatives (recall/answer `alternatives`): rank fusion of the question's ranking
    # (weight 1) and each alternative's, over each one's top `alt_top` (benchmarks/smallvault.py --alternatives).
    "w_alt": 0.5,
    "alt_rrf_k": 5.0,
    "alt_top": 30,
    # Deep mode (recall --rerank, MCP deep): each ranking's pool of passages (e5 and BM25), and the second
    # model over the first pass's top `deep_top` (instead of `rr_top`). benchmarks/smallvault.py --deep.
    "deep_pool": 200,
    "deep_top": 100,
    # Late interaction's weight in deep mode, over the first pass's top `deep_li_top` notes' best
    # `deep_li_passages` passages. Off: e5's token vectors are computed per question (nothing holds them
    # for a whole vault), 1.2-1.6 ms CPU per token here: 100 x 2 passages cost 4.3 s CPU per recall at 511 notes,
    # 30 x 1 3-6 s; and at 0.5 over 100 x 2, 30 x 1 or 10 x 1 it moved no smallvault hit@1 or hit@3 at
    # 81 and 511 notes (docs/benchmarks.md, issue 29, stop 38).
    "deep_w_li": 0.0,
    "deep_li_top": 30,
    "deep_li_passages": 1,
    # ... and its MaxSim added to the second model's final fusion (search/rerank.py, fuse). Off: at 81 notes
    # (smallvault, tune/held hit@1) 1.0 gave .881/.732 and 3.0 .881/.683 against .881/.707 without.
    "deep_w_late": 0.0,
    "tier_cov": 0.5,  # tiered recall stays in typed memory when its best hit covers this much
    "drop_below": 0.25,  # hits scoring under this fraction of the best are dropped
    "spelling": 1.0,  # 1 = a word the vault has never seen is searched as the vault spells it (search.spelling)
    # The prompt hook's gate (abstain.hook_gate): each injected note on its own evidence, chosen on the
    # tune half of benchmarks/prompts at three vault sizes (docs/benchmarks.md, the curve).
    "hook_rr": 0.28,  # the second model's gap over the background a typed memory needs (English prompts)
    "hook_rr_note": 0.4,  # ... and this much more for reference material (a note that is not typed memory)
    "hook_gap": 0.02,  # where it did not read the prompt: e5's gap plus hook_w_words x specific coverage
    "hook_gap_note": 0.06,
    "hook_gap_wordless": 0.04,  # ... more for a note holding none of a Latin-script prompt's words (abstain._need)
    "hook_w_gap": 0.5,  # weight of e5's gap beside the second model's
    "hook_clear": 0.08,  # a lead this far above the next hit's evidence ...
    "hook_clear_less": 0.04,  # ... needs this much less than its kind's bar
    "hook_clear_bar": 0.5,  # "clear" compares evidence less this fraction of each hit's own bar
    "hook_w_words": 0.01,  # weight of coverage x specificity beside e5's gap
    "hook_lex": 0.25,  # lexical only (no vectors): coverage x specificity (flat from 0.25 to 0.35; docs/benchmarks.md)
    "hook_lex_note": 0.3,
    "hook_words": 1.1,  # coverage x specificity that answers on any basis (the vault's own rare words)
    "hook_words_note": 0.3,
    "hook_rel": 0.7,  # a hit needs at least this fraction of the strongest hit's strength (times its bar)
    "hook_by_evidence": 0.0,  # 1 = order the kept hits by their evidence instead of recall's order
    "hook_referents": 1,  # how many notes the previous reply points to are injected
    "hook_referent_first": 1.0,  # 1 = for a short prompt, what the reply points to comes first
    "hook_max_items": 3,
    "hook_conversational": 1.0,  # 1 = a short prompt only addressed to the agent ("ok go on") is not searched
    "hook_context_chars": 200,  # a short prompt is also searched (hybrid) with this much of the reply's end
    "hook_referent_top": 3,  # ... found among the first this many hits of the prompt + reply search
    # When the reply names no note by its title, one that the prompt's own search found too is the referent
    # if it has this fraction of the evidence the gate asks there (inf: never).
    "hook_referent_agree": 0.4,
    "hook_referent_notes": 0.0,  # 1 = reference notes (not typed memory) can be referents too
}
