"""The patches, one module per fix, grouped by upstream library. Ships as ``grpo_compat.patches``."""

# Where patches wrap the same function, the one listed first is the outermost wrapper: it runs first
# and sees upstream's result last. Refusals come first (nothing else runs for a launch or settings that
# cannot train), then changes to the arguments, then fixes of what upstream built or computed.
# Every patch that shares a target with another is listed (tests/test_patches.py checks it).
WRAPPING_ORDER = (
    # GRPOTrainer.__init__ (the version refusals' windows do not meet)
    "trl.refuse-transformers-without-processing-class",
    "trl.refuse-trl-0.14-on-transformers-4.52",
    "trl.refuse-liger-missing-loss-type",
    "trl.launch-guard",
    "trl.refuse-outdated-logps-override",  # the trainer's class, before its settings are checked
    "trl.grpo-trainer-check",
    "trl.reward-dry-run",  # after the settings check: the dry run builds as many completions as the config asks
    "trl.reward-count-check",  # wraps the reward functions upstream has just stored
    "trl.peft-zero3-reentrant",  # sets gradient_checkpointing_kwargs before upstream reads them
    "trl.peft-input-grads",  # hooks the embeddings of the model upstream has just wrapped
    "trl.empty-tools-as-none",  # reads the tools upstream has just stored
    # GRPOConfig.__post_init__
    "trl.grpo-config-check",
    "trl.deepspeed-agreement",  # fills the DeepSpeed config TrainingArguments.__post_init__ has just built
    "trl.sequence-level-token-sum",  # warns after upstream resolved the loss type and level (it refuses nothing)
    # GRPOTrainer.training_step (their windows do not meet: trl >= 0.22 needs transformers >= 4.55, not 4.48)
    "trl.accumulation-steps-default",  # the attribute upstream's loss reads, for the whole step
    "trl.deepspeed-gas-double-scaling",
    # ms-swift RLHFArguments.__post_init__ (3.x, 4.x)
    "swift.refuse-trl-0.20-on-swift-3.5",
    "swift.refuse-trl-optional-imports",
    "swift.refuse-server-mode-without-vllm",
    "swift.refuse-sleep-level-accumulation",  # before upstream replaces gradient_accumulation_steps
    "swift.grpo-arguments-check",
    # ms-swift SwiftRLHF._prepare_model_tokenizer (the windows do not meet: ms-swift 3.2.0 / >= 3.5)
    "swift.refuse-trl-0.16-on-swift-3.2.0",
    "swift.refuse-liger-multimodal-text-base-model",  # ms-swift >= 3.7 with transformers < 4.52
    "swift.reward-names-check",
    # ms-swift GRPOTrainer.__init__ (both act on the trainer upstream has just built)
    "swift.reward-count-check",  # wraps the reward functions after the dry run called them unwrapped
    "swift.reward-dry-run",
    # GRPOTrainer.compute_liger_loss (trl 0.17-1.5)
    "trl.liger-lm-head-guard",  # reroutes a model that returns logits to the non-Liger loss
    "trl.liger-zero3-lm-head-route",  # routes a ZeRO-3-sharded lm_head to the non-Liger loss
    "trl.liger-tool-mask",  # on the Liger loss itself (the rerouted non-Liger loss applies tool_mask already)
    # GRPOTrainer.compute_loss (trl 0.17-1.13 with liger-kernel; trl.logps-alignment, below, wraps it too)
    "trl.fused-loss-check",  # compares the loss the call below returns, once; changes nothing it computes
    # GRPOTrainer._get_per_token_logps (trl 0.19)
    "trl.logps-trim-logits",  # hands the model a logits trimmer
    "trl.logps-alignment",  # aligns the call it makes
    # VLLMGeneration.sync_weights (trl >= 1.0)
    "trl.vllm-sync-check",  # checks what the sync below left in the engine
    "trl.vllm-cpu-prepacked-sync",  # loads through vLLM's reload where the engine's weights are packed away
)
