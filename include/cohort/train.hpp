#pragma once

/// cohort's training layer: the numerical helpers an engine calls around its training step,
/// over raw buffers and the public Communicator only. One header per concern:
///
///   cohort/train/coordination.hpp  main process, named barriers, main_first, print, stop trigger
///   cohort/train/precision.hpp  cast, GradScaler (dynamic loss scaling), FP8 amax scaling
///   cohort/train/gradients.hpp  bucketed overlapped gradient averaging, accumulation, clipping
///   cohort/train/mesh.hpp       process mesh: dp/pp/cp/tp groups, their communicators, all_to_all
///   cohort/train/metrics.hpp    reduce and gather results, pad across ranks, shard the data
///   cohort/train/objects.hpp    bytes and plain values between ranks (broadcast, gathers)
///   cohort/train/random.hpp     Philox, derived seeds, set_seed, engine RNG state broadcast
///
/// One training step, as an engine drives it (fp16 gradients, accumulation over k micro-steps):
///
///     bool sync = grads.begin_micro_step(end_of_data);
///     backward(loss * scaler.scale() * grads.loss_multiplier());   // calls grads.mark_ready(i)
///     if (sync) {
///       grads.finish();                         // averaged across ranks, overlapped with backward
///       scaler.unscale(grad_buffers);           // fused unscale + inf check, agreed by all ranks
///       clip_grad_norm(grad_buffers, 1.0);
///       if (scaler.step(grad_buffers)) optimizer.step();   // engine; skipped on overflow
///       scaler.update();
///     }
///
/// Every call that communicates is collective; an error decided from exchanged data is thrown on
/// every rank, so no rank is left waiting. A world of one communicates nothing and computes the
/// same results.

#include <cohort/train/coordination.hpp>
#include <cohort/train/gradients.hpp>
#include <cohort/train/mesh.hpp>
#include <cohort/train/metrics.hpp>
#include <cohort/train/objects.hpp>
#include <cohort/train/precision.hpp>
#include <cohort/train/random.hpp>
