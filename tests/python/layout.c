/*
** layout.c: the C layout of flashsampling.h's structs, for
** tests/python/test_python.py to compare with python/flashsampling.py's
** ctypes mirrors.  Prints "<struct> <field> <offset> <size>" a line, then
** "<struct> sizeof <size>", and "version <FS_VERSION_NUMBER>".
*/
#include "flashsampling.h"

#include <stddef.h>
#include <stdio.h>

#define F(S, T, f) printf("%s %s %zu %zu\n", S, #f, offsetof(T, f), sizeof(((T *)0)->f))
#define END(S, T) printf("%s sizeof %zu\n", S, sizeof(T))

int main(void) {
  F("Problem", fs_problem, batch); F("Problem", fs_problem, hidden);
  F("Problem", fs_problem, vocab); F("Problem", fs_problem, vocab_offset);
  F("Problem", fs_problem, dtype); F("Problem", fs_problem, hidden_states);
  F("Problem", fs_problem, hidden_stride); F("Problem", fs_problem, weight);
  F("Problem", fs_problem, weight_stride); END("Problem", fs_problem);
  F("Sampling", fs_sampling, temperature); F("Sampling", fs_sampling, temperatures);
  F("Sampling", fs_sampling, num_samples); F("Sampling", fs_sampling, seed);
  F("Sampling", fs_sampling, seeds); F("Sampling", fs_sampling, offset);
  F("Sampling", fs_sampling, offsets); END("Sampling", fs_sampling);
  F("Outputs", fs_outputs, tokens); F("Outputs", fs_outputs, logits);
  F("Outputs", fs_outputs, keys); END("Outputs", fs_outputs);
  F("Options", fs_options, size); F("Options", fs_options, token_mask);
  F("Options", fs_options, token_mask_stride); F("Options", fs_options, logprobs);
  F("Options", fs_options, logit_softcap);
  F("Options", fs_options, logit_bias_tokens); F("Options", fs_options, logit_bias_values);
  F("Options", fs_options, logit_bias_count);
  F("Options", fs_options, min_p); F("Options", fs_options, min_ps);
  F("Options", fs_options, top_k); F("Options", fs_options, top_ks);
  F("Options", fs_options, top_p); F("Options", fs_options, top_ps);
  F("Options", fs_options, repetition_penalty); F("Options", fs_options, repetition_penalties);
  F("Options", fs_options, top_logprobs); F("Options", fs_options, top_logprob_tokens);
  F("Options", fs_options, top_logprob_values); F("Options", fs_options, ranks);
  F("Options", fs_options, target_tokens); F("Options", fs_options, target_logprobs);
  F("Options", fs_options, target_ranks);
  END("Options", fs_options);
  printf("version %d\n", FS_VERSION_NUMBER);
  return 0;
}
