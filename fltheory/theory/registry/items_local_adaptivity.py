"""Items of LocalAdaptivity: Wang et al., "Local Adaptivity in Federated Learning: Convergence and Consistency"."""

from __future__ import annotations

from functools import partial

from .model import Item

__all__ = ["ITEMS"]

P = "local-adaptivity"
_i = partial(Item, paper=P)
TO = "tests/algorithms/test_fedopt.py::"
TC = "tests/theory/test_closed_forms.py::"
TOP = "tests/theory/test_operators.py::"
TX = "tests/experiments/test_contraction.py::"
TR = "tests/theory/test_bounds_recursions.py::"
TL = "tests/theory/test_local_adaptivity_lemmas.py::"
RC = "fltheory.theory.bounds.recursions."
_DRAFT = ("the printed inequality was lost in the seed's text extraction (a draft of arXiv:2106.02305 whose version "
          "is not printed); ")
_REAL = "accuracy of networks trained with TensorFlow Federated on Stack Overflow / Shakespeare / CIFAR100"

ITEMS: tuple[Item, ...] = (
    _i(key=f"{P}:eq1", number="eq. 1", kind="definition",
       statement="F(x) = sum_i p_i F_i(x) with p_i proportional to client i's data size.",
       code=("fltheory.problems.QuadraticFederation",),
       tests=("tests/problems/test_quadratic.py::test_quadratic_oracles_vs_loop_and_finite_differences",),
       coverage="full"),
    _i(key=f"{P}:def1", number="Definition 1", kind="definition",
       statement="Client optimizer operator O_i(x; s_0, xi): the model after tau_i ClientOpt steps from x "
                 "with initial optimizer state s_0.",
       code=("fltheory.theory.fedopt_operator", "fltheory.theory.FedOptOperator"),
       tests=(TOP + "test_client_maps_and_operator_match_per_client_loop",),
       coverage="full"),
    _i(key=f"{P}:eq2", number="eq. 2", kind="equation",
       statement="Preconditioned SGD: y_{k+1} = y_k - eta P_k g(y_k).",
       code=("fltheory.optim.preconditioned.preconditioned",),
       tests=("tests/optim/test_preconditioned.py::test_preconditioned_gd_on_quadratic_follows_matrix_power",),
       coverage="full"),
    _i(key=f"{P}:eq3", number="eq. 3", kind="equation",
       statement="AdaGrad preconditioner: v <- v + g*g, P = diag(1/(sqrt(v) + eps)), from the initial state.",
       code=("fltheory.optim.adagrad",),
       tests=("tests/optim/test_adaptive.py::test_adagrad_first_step_by_hand",
              "tests/optim/test_adaptive.py::test_multi_step_against_loop"),
       coverage="full"),
    _i(key=f"{P}:eq4", number="eq. 4", kind="equation",
       statement="Each client runs O_i from the broadcast model: y_i = O_i(x_t).",
       code=("fltheory.algorithms.FedOpt",),
       tests=(TO + "test_vectorized_equals_reference", TO + "test_property_vectorized_equals_reference"),
       coverage="full"),
    _i(key=f"{P}:eq5", number="eq. 5", kind="equation",
       statement="Server GD on the pseudo-gradient: x_{t+1} = x_t + eta_s sum_i p_i (y_i - x_t).",
       code=("fltheory.algorithms.FedOpt", "fltheory.optim.server.fedavg"),
       tests=(TO + "test_sgd_client_sgd_one_server_is_fedavg",
              "tests/optim/test_adaptive.py::test_server_sgd_one_is_fedavg"),
       coverage="full"),
    _i(key=f"{P}:restart", number="sec. 3 (restart)", kind="option",
       statement="Client optimizer states (preconditioners, momentum) are restarted at every round.",
       code=("fltheory.algorithms.FedOpt",),
       tests=(TO + "test_synchronised_states_are_shared_and_persisted_states_are_per_client",
              TO + "test_vectorized_equals_reference"),
       coverage="full"),
    _i(key=f"{P}:persist-sync", number="sec. 3 (inherit), sec. 6 (synchronise)", kind="option",
       statement="Alternatives: each client inherits its own stale state, or states are synchronised "
                 "(averaged) after every round.",
       code=("fltheory.algorithms.FedOpt", "fltheory.algorithms.fedopt.synchronised_states"),
       tests=(TO + "test_synchronised_states_are_shared_and_persisted_states_are_per_client",
              TO + "test_synchronised_counters_are_shared_so_adam_bias_correction_matches_the_moments"),
       coverage="full"),
    _i(key=f"{P}:fig1", number="Figure 1", kind="figure",
       statement="Toy quadratic, deterministic gradients: restarted local AdaGrad is much faster than FedAvg "
                 "to a loose tolerance but stops far from x*; restart vs persist vs synchronise compared.",
       code=("fltheory.algorithms.FedOpt",),
       tests=("tests/experiments/test_local_adaptivity_policies.py::test_checks_hold_then_flag",),
       checks=("local_adaptivity_policies:restart-faster",),
       coverage="partial", coverage_before="none",
       note="each method's rate is tuned on a grid for the loose tolerance (the best AdaGrad rate sits at "
            "the grid's edge); 'much faster' is measured as a rounds ratio on one ill-conditioned toy "
            "quadratic, not on the paper's instance (unknown)"),
    _i(key=f"{P}:eq6", number="eq. 6", kind="equation",
       statement="FedOpt with restarted states is the (stochastic) Mann iteration x <- (1 - eta_s) x + "
                 "eta_s T(x) of T = sum p_i E O_i.",
       code=("fltheory.theory.fedopt_operator", "fltheory.theory.operator_fixed_point",
             "fltheory.theory.mann_rate"),
       tests=(TOP + "test_adagrad_fixed_point_equals_end_of_long_simulation",
              TC + "test_long_iteration_converges_to_closed_form_at_mann_rate"),
       checks=("fedopt_fixed_points:operator-root", "contraction:mann-rate"),
       coverage="full"),
    _i(key=f"{P}:server-opt", number="sec. 4 (server optimizers)", kind="claim",
       statement="Replacing server GD by another server optimizer changes the iteration, not the fixed "
                 "points of T.",
       code=("fltheory.optim.server.fedadagrad", "fltheory.optim.server.fedadam",
             "fltheory.optim.server.fedavgm"),
       checks=("server_optimizers:server-fixed-point",),
       coverage="full"),
    _i(key=f"{P}:a1", number="Assumption 1", kind="assumption",
       statement="||E O_i(x) - E O_i(y)||^2 <= rho_i ||x - y||^2 with rho_i < 1 decreasing in tau_i.",
       code=("fltheory.theory.lipschitz_ratios",),
       tests=(TX + "test_finding_restarted_adagrad_client_maps_are_not_contractions",
              TX + "test_adagrad_straddle_ratio_is_the_slope_of_the_first_step_at_zero_gradient"),
       checks=("contraction:a1-sgd", "contraction:a1-sgd-tight", "contraction:a1-adaptive"),
       coverage="full", coverage_before="partial",
       note="for SGD it holds with the tight constant for every eta < 2/L; for restarted AdaGrad and Adam "
            "it fails (violated: App. B.4 says adaptive optimizers such as Adam satisfy it) unless the "
            "initial accumulator or eps is large: in the contraction experiment's sweep it holds only at "
            "the largest value, 0.1, for both (finding)"),
    _i(key=f"{P}:b2", number="App. B.2", kind="lemma",
       statement="For SGD clients Assumption 1 holds with rho_i = (1 - eta mu)^tau (the tight Lipschitz "
                 "constant of the client map is max(|1 - eta mu|, |1 - eta L|)^tau, valid for every "
                 "eta < 2/L; with A1's squared norms the tight constant is its square).",
       hypotheses=("F_i mu-strongly convex and L-smooth",),
       code=("fltheory.theory.bounds.gd_contraction_factor", "fltheory.theory.bounds.sgd_operator_constants",
             "fltheory.theory.sgd_contraction_bound"),
       tests=("tests/theory/test_bounds_gd_contraction.py::test_attained_by_the_diagonal_quadratic_for_every_step_below_two_over_L",
              "tests/theory/test_bounds_gd_contraction.py::test_bounds_gd_on_a_non_quadratic_strongly_convex_function",
              TOP + "test_sgd_bound_is_attained_on_the_slowest_eigenvector",
              TX + "test_exact_gd_map_norm_is_the_spectral_norm_of_the_matrix_power"),
       checks=("contraction:a1-sgd", "contraction:a1-sgd-tight"),
       coverage="full", coverage_before="partial"),
    _i(key=f"{P}:a2", number="Assumption 2, App. B.3", kind="assumption",
       statement="E||O_i(x) - E O_i(x)||^2 <= phi_i non-decreasing in tau_i; for SGD phi_i = tau eta^2 "
                 "sigma^2.",
       code=("fltheory.theory.bounds.sgd_operator_constants",),
       tests=(TX + "test_noise_variance_is_the_trace_of_the_summed_matrix_powers",
              TX + "test_a2_violation_is_flagged"),
       checks=("contraction:a2-sgd",),
       coverage="full"),
    _i(key=f"{P}:thm1", number="Theorem 1, eq. 7", kind="theorem",
       statement="Under A1-A2, T has a unique fixed point x~ and E||x_t - x~||^2 decays at the rate of eq. 7 "
                 "(contraction 1 - eta_s(1 - rho_bar) plus a noise floor).",
       hypotheses=("Assumption 1", "Assumption 2", "0 < eta_s <= 1"),
       code=("fltheory.theory.bounds.fedopt_theorem1", "fltheory.theory.bounds.fedopt_theorem1_quadratic",
             RC + "fedopt_theorem1_rate"),
       tests=("tests/properties/test_fedopt_theorem1_properties.py::test_theorem1_recursion_bounds_the_exact_error",
              "tests/properties/test_fedopt_theorem1_properties.py::test_theorem1_recursion_bounds_monte_carlo_error",
              "tests/theory/test_bounds_other.py::test_fedopt_theorem1_recursion_unrolled",
              TR + "test_eq7_rate_bounds_the_exact_error_under_the_lemma_schedule",
              TR + "test_eq7_exact_error_matches_fedopt_runs_with_the_schedule",
              TR + "test_eq7_rate_is_order_noise_over_R"),
       checks=("contraction:theorem1", "local_adaptivity_rates:eq7-rate"),
       coverage="full", coverage_before="partial",
       note="eq. 7 as printed was lost in the seed's text (a draft of arXiv:2106.02305, version not printed); "
            "evaluated as the proof's recursion (eq. 61) unrolled by Lemma 3 with Stich's constants 32 and 36 "
            "(as recalled, not verified against the source; they do bound the recursion's exact worst case) "
            "and the lemma's server-rate schedule, against exact expected errors; the one-step recursion is "
            "checked too"),
    _i(key=f"{P}:thm1-fixed-point", number="Theorem 1 (fixed point), App. C", kind="claim",
       statement="T is a contraction (Banach) with a unique fixed point x~, generally not x*.",
       code=("fltheory.theory.operator_fixed_point", "fltheory.theory.fedopt_quadratic_fixed_point"),
       tests=(TOP + "test_adagrad_fixed_point_equals_end_of_long_simulation",),
       checks=("fedopt_fixed_points:operator-root", "minimizer_inconsistency:closed-vs-root"),
       coverage="full"),
    _i(key=f"{P}:thm1-gd", number="App. C (special case GD)", kind="corollary",
       statement="Deterministic GD clients: linear convergence of x_t to x~ (no noise floor).",
       code=("fltheory.theory.mann_rate",),
       checks=("contraction:mann-rate",),
       coverage="partial",
       note="the exact linear rate is checked; the special case's printed constant is lost"),
    _i(key=f"{P}:thm1-sgd", number="App. C (special case SGD), eq. 77, eq. 85", kind="corollary",
       statement="Identical SGD clients with decaying rates: the optimal O(sigma^2/(N t)) rate of "
                 "synchronous "
                 "SGD (eq. 77), matching the IID local-SGD lower bound (eq. 85).",
       hypotheses=("identical clients", "equal rates and steps", "decaying client rate"),
       code=(RC + "sgd_special_case_rate",),
       tests=(TR + "test_eq77_rate_bounds_the_exact_error_and_scales_as_one_over_N_t",
              TR + "test_eq77_exact_errors_match_fedavg_runs_with_the_decaying_rate"),
       checks=("local_adaptivity_rates:eq77-rate",),
       coverage="partial", coverage_before="none",
       note=_DRAFT + "eq. 77 (one local step) is evaluated with the client rate 2/(mu (t + 2L/mu)) and the "
            "constants of the induction eq. 68 derived by us (E||x_t - x*||^2 <= max(4 sigma^2/(mu^2 N), "
            "gamma e_0)/(t + gamma)), against exact errors, 1/(N t) scaling measured; eq. 85 (tau > 1) is not "
            "evaluated"),
    _i(key=f"{P}:better-opt", number="sec. 4 (better client optimizers)", kind="claim",
       statement="The bound of eq. 7 increases with rho_bar, so client optimizers with smaller contraction "
                 "constants speed up global convergence.",
       code=("fltheory.theory.bounds.fedopt_theorem1", "fltheory.theory.mann_rate"),
       tests=("tests/theory/test_bounds_local_adaptivity_claims.py::"
              "test_theorem1_bound_increases_with_the_contraction_constant",
              "tests/theory/test_bounds_local_adaptivity_claims.py::"
              "test_more_local_progress_gives_a_smaller_constant_and_a_faster_exact_rate"),
       coverage="partial", coverage_before="none",
       note="monotonicity of the (recursion-form) bound and the exact rate of GD clients with more local "
            "steps; adaptive client optimizers are not compared (their A1 constants fail, see Assumption 1)"),
    _i(key=f"{P}:fedavg-vanishing", number="sec. 4, App. D", kind="claim",
       statement="GD clients with equal rates and steps on quadratics: x~ - x* = O(eta), vanishing as the "
                 "client rate decays.",
       code=("fltheory.theory.fedavg_first_order_bias",),
       tests=(TC + "test_fedavg_first_order_bias_is_second_order_accurate",),
       checks=("minimizer_inconsistency:fedavg-first-order",),
       coverage="full"),
    _i(key=f"{P}:thm2", number="Theorem 2", kind="theorem",
       statement="Quadratic clients, fixed preconditioners P_i: closed-form fixed point x~ of FedOpt.",
       code=("fltheory.theory.fedopt_quadratic_fixed_point", "fltheory.theory.symbolic.scalar_fixed_point"),
       tests=(TC + "test_fixed_point_is_fixed_by_the_readable_round",
              TC + "test_diagonal_and_full_preconditioners_agree",
              "tests/theory/test_symbolic.py::test_scalar_fixed_point_matches_closed_form"),
       checks=("fedopt_fixed_points:closed-form", "minimizer_inconsistency:closed-vs-root"),
       coverage="full"),
    _i(key=f"{P}:eq8", number="eq. 8", kind="equation",
       statement="As eta -> 0, x~ tends to a limit different from x* unless c_i tau_i P_i are equal: a "
                 "non-vanishing bias.",
       code=("fltheory.theory.fedopt_small_rate_limit",),
       tests=(TC + "test_small_rate_limit_eq8",
              TOP + "test_fixed_preconditioner_limit_matches_seed_001_eq_8"),
       checks=("minimizer_inconsistency:eq8-limit",),
       coverage="full"),
    _i(key=f"{P}:eq9", number="eq. 9", kind="equation",
       statement="The aggregated change weights each local gradient by a client-dependent matrix: a skewed "
                 "global gradient.",
       code=("fltheory.theory.fedopt_quadratic_round_map",),
       tests=(TC + "test_round_map_matches_readable_round_at_random_points",),
       coverage="full"),
    _i(key=f"{P}:eq10", number="eq. 10", kind="equation",
       statement="First-order (Taylor) expansion of the fixed-point equation: non-vanishing term plus "
                 "O(eta).",
       code=("fltheory.theory.symbolic.fixed_point_series",),
       tests=("tests/theory/test_symbolic.py::test_series_constant_term_is_eq8_and_first_order_is_accurate",),
       coverage="full"),
    _i(key=f"{P}:ideal-precond", number="sec. 4 (ideal pre-conditioners)", kind="claim",
       statement="With ideal preconditioners (inverse local Hessians) FedOpt reaches its fixed point in one "
                 "round for suitable rates; with a shared preconditioner it needs several rounds.",
       code=("fltheory.optim.preconditioned.preconditioned", "fltheory.theory.fedopt_quadratic_fixed_point"),
       tests=("tests/experiments/test_local_adaptivity_policies.py::test_ideal_preconditioners_land_on_the_mean_of_client_optima_in_one_round",
              "tests/optim/test_preconditioned.py::test_newton_preconditioner_converges_in_one_step"),
       checks=("local_adaptivity_policies:ideal-one-round",),
       coverage="full", coverage_before="partial",
       note="the fixed point reached in one round is sum p_i x_i*, not x* (heterogeneous Hessians)"),
    _i(key=f"{P}:eq11", number="eq. 11", kind="equation",
       statement="Local correction: clients send G_i^{-1}-normalised changes, removing the non-vanishing "
                 "bias (bias O(eta)).",
       code=("fltheory.algorithms.FedOpt", "fltheory.algorithms.fedopt.corrected_changes"),
       tests=(TO + "test_adagrad_local_correction_bias_is_order_eta",
              TO + "test_local_correction_by_hand_with_sgd",
              TC + "test_local_correction_removes_bias_at_rate_eta"),
       checks=("fedopt_fixed_points:correction", "minimizer_inconsistency:correction-O(eta)"),
       coverage="full"),
    _i(key=f"{P}:global-correction", number="sec. 5 (global correction)", kind="option",
       statement="Global (joint) correction rescales the aggregate with a client-independent matrix: same "
                 "fixed point as local correction, faster progress.",
       code=("fltheory.algorithms.FedOpt", "fltheory.algorithms.fedopt.joint_direction"),
       tests=(TO + "test_joint_and_local_correction_share_the_fixed_point",),
       checks=("neural:joint-correction-stationary",),
       coverage="full"),
    _i(key=f"{P}:alg1", number="Algorithm 1", kind="algorithm",
       statement="Pseudo-code of FedOpt with local adaptivity and local / global correction "
                 "(App. A.3), including Adam's weighted preconditioner sums.",
       code=("fltheory.algorithms.FedOpt",),
       tests=(TO + "test_local_and_joint_correction_by_hand_with_memory_optimizers",
              "tests/optim/test_adaptive.py::test_correction_weight_sums_gradient_weights"),
       coverage="full"),
    _i(key=f"{P}:lemma1", number="Lemma 1, eq. 12, eq. 13", kind="lemma",
       statement="For twice-differentiable f: grad f(x) - grad f(y) = Hbar (x - y), Hbar the Hessian averaged "
                 "over the segment from y to x.",
       tests=(TL + "test_lemma1_gradient_difference_is_the_averaged_hessian",),
       coverage="full", coverage_before="none",
       note=_DRAFT + "the statement and proof text ('by linearity of the integral') fix it; checked on "
            "logistic clients with composite Gauss-Legendre quadrature of the exact Hessians"),
    _i(key=f"{P}:lemma2", number="Lemma 2, eq. 14, eq. 15, eq. 16", kind="lemma",
       statement="For mu-strongly convex L-smooth f and x, y with the same random sources: contraction of a "
                 "gradient step, monotonicity and co-coercivity of the gradient difference, in expectation.",
       hypotheses=("f mu-strongly convex and L-smooth", "x, y share their random sources"),
       tests=(TL + "test_lemma2_inequalities_in_expectation_over_shared_noise",
              TL + "test_lemma2_contraction_is_attained_by_a_quadratic_direction"),
       coverage="partial", coverage_before="none",
       note=_DRAFT + "checked in our reading from the proof's steps (Lemma 1 with mu I <= Hbar <= L I): "
            "E||x - y - eta (grad f(x) - grad f(y))||^2 <= max(|1 - eta mu|, |1 - eta L|)^2 E||x - y||^2, "
            "mu E||x - y||^2 <= E<grad diff, x - y> <= L E||x - y||^2, E||grad diff||^2 <= L E<grad diff, "
            "x - y>; the exact printed forms may differ"),
    _i(key=f"{P}:lemma3", number="Lemma 3, eq. 62, eq. 63", kind="lemma",
       statement="Stich's lemma: a non-negative recursion with decaying step gives the O(1/t) rate.",
       code=(RC + "stich_schedule", RC + "stich_bound"),
       tests=(TR + "test_stich_lemma_holds_on_worst_case_sequences", TR + "test_stich_schedule_by_hand",
              TR + "test_stich_bound_holds_for_the_exact_supremum_over_all_sequences"),
       coverage="full", coverage_before="none",
       note=_DRAFT + "the statement is Lemma 3 of Stich (arXiv:1907.04232), which the seed quotes; its step "
            "sizes, weights and constants 32 and 36 are as recalled, not verified against the source (its "
            "printed text was not available). Verified: under that schedule the bound holds for the exact "
            "supremum of Psi_T over all admissible sequences (backward recursion, brute force for short runs; "
            "worst ratios 0.016 and 0.333 of the two terms)"),
    _i(key=f"{P}:a3", number="Assumption 3", kind="assumption",
       statement="(App. F) Each local objective is L-smooth (possibly non-convex).",
       code=("fltheory.nn.NeuralFederation",),
       coverage="none", note="the neural constants belong to the neural-network work; not evaluated here"),
    _i(key=f"{P}:a4", number="Assumption 4", kind="assumption",
       statement="(App. F) Preconditioner matrices are symmetric positive definite with bounded operator "
                 "norm.",
       code=("fltheory.optim.adagrad",),
       tests=(TL + "test_assumptions_4_and_5_hold_for_adagrad_with_explicit_constants",),
       coverage="partial", coverage_before="none",
       note="holds for restarted client AdaGrad with ||P|| <= 1/(sqrt(nu_0) + eps) [derived, checked on random "
            "gradient sequences]; Adam and Yogi are not checked"),
    _i(key=f"{P}:a5", number="Assumption 5", kind="assumption",
       statement="(App. F) Preconditioned gradients have bounded norm.",
       code=("fltheory.optim.adagrad",),
       tests=(TL + "test_assumptions_4_and_5_hold_for_adagrad_with_explicit_constants",),
       coverage="partial", coverage_before="none",
       note="holds for client AdaGrad with bound sqrt(d) whatever the gradients (nu is updated before the "
            "division) [derived, checked on random gradient sequences]; Adam and Yogi are not checked"),
    _i(key=f"{P}:thm3", number="Theorem 3, eq. 99, eq. 100", kind="theorem",
       statement="Deterministic clients with local correction reach a stationary point of F at the rate of "
                 "eq. 100, with no non-vanishing bias.",
       hypotheses=("Assumptions 3-5", "equal client rates and steps", "eta_s and eta of eq. 99"),
       code=("fltheory.algorithms.FedOpt",),
       tests=("tests/nn/test_algorithms_on_nn.py::test_local_correction_removes_the_non_vanishing_bias",),
       checks=("neural:local-correction-stationary", "neural:bias-vanishes"),
       coverage="partial",
       note="qualitative only: the rate of eq. 100 with neural constants is not evaluated"),
    _i(key=f"{P}:lemma4", number="Lemma 4, eq. 101", kind="lemma",
       statement="(App. F.2) A matrix inequality for sums of symmetric positive definite matrices.",
       hypotheses=("A_1..A_n symmetric positive definite",),
       tests=(TL + "test_lemma4_matrix_weighted_jensen_and_its_euclidean_form",
              TL + "test_lemma4_is_an_equality_for_equal_vectors"),
       coverage="partial", coverage_before="none",
       note=_DRAFT + "checked in our reading from its use in eq. 117 (bounding the locally corrected change): "
            "(sum A_k u_k)^T (sum A_k)^{-1} (sum A_k u_k) <= sum u_k^T A_k u_k and ||(sum A_k)^{-1} sum A_k "
            "u_k||^2 <= (a_max/(n a_min)) sum ||u_k||^2, Hypothesis on random SPD families"),
    _i(key=f"{P}:fig4", number="Figure 4, App. B.4", kind="figure",
       statement="Logistic regression on MNIST: Adam's measured contraction constant rho is smaller than "
                 "SGD's for the same local steps (A1 holds empirically for Adam).",
       code=("fltheory.theory.lipschitz_ratios", "fltheory.theory.fedopt_operator",
             "fltheory.problems.LogisticFederation", "fltheory.nn.load_image_dataset",
             "fltheory.theory.bounds.gd_contraction.gd_contraction_factor"),
       tests=("tests/experiments/test_local_adaptivity_fig4.py::test_measured_ratios_equal_readable_local_loops",
              "tests/experiments/test_local_adaptivity_fig4.py::test_sgd_ratio_between_gd_contraction_constants",
              "tests/experiments/test_local_adaptivity_fig4.py::test_small_rate_agrees_with_figure_4",
              "tests/experiments/test_local_adaptivity_fig4.py::test_finding_adam_not_below_sgd_at_rate_0_05",
              "tests/experiments/test_local_adaptivity_fig4.py::test_finding_a1_fails_for_adam_at_rate_0_05"),
       checks=("local_adaptivity_fig4:adam-below-sgd", "local_adaptivity_fig4:a1-adam",
               "local_adaptivity_fig4:a1-sgd-tight"),
       coverage="partial",
       note="softmax logistic regression on the bundled 5,000-image MNIST subset (downsampled, a few IID "
            "clients, full-batch gradients instead of shared mini-batches, rates not stated by the paper, "
            "swept); finding: Adam is below SGD and A1 holds at lr 0.005 (quick and full), at lr 0.05 only in "
            "the full config (14x14 pixels; quick 7x7: Adam 1.095 > 1 at tau 20), and at lr 0.5 in neither "
            "(Adam up to 3.1 quick, 4.6 full); SGD stays under max(|1 - eta mu|, |1 - eta L|)^tau"),
    _i(key=f"{P}:sync-worse", number="sec. 6 (synchronising states)", kind="claim",
       statement="Synchronising client states each round does not help and is worse than restarting.",
       code=("fltheory.algorithms.FedOpt",),
       tests=("tests/experiments/test_local_adaptivity_policies.py::test_finding_synchronised_states_beat_restarted_ones_on_a_deterministic_quadratic",),
       checks=("local_adaptivity_policies:sync-not-better",),
       coverage="partial", coverage_before="none",
       note="on a deterministic toy quadratic (finding: synchronised accumulators keep growing and end "
            "closer to x*); the paper's claim is about Shakespeare accuracy"),
    _i(key=f"{P}:table1", number="Table 1", kind="table",
       statement="Client AdaGrad with restart improves test accuracy over client SGD (SO NWP, Shakes. NCP, "
                 "SO TP).",
       coverage="none", checkable=False, note=_REAL),
    _i(key=f"{P}:table2", number="Table 2", kind="table",
       statement="Local / joint correction improve client AdaGrad over the best server-only adaptive method.",
       coverage="none", checkable=False, note=_REAL),
    _i(key=f"{P}:table3", number="Table 3", kind="table",
       statement="Correction also helps client Adam and Yogi on SO NWP.",
       coverage="none", checkable=False, note=_REAL),
    _i(key=f"{P}:table4", number="Table 4, Table 5", kind="table",
       statement="Hyper-parameter ranges and best values of the experiments.",
       coverage="none", checkable=False,
       note="lists of tuned settings for the real-data tasks, no claim to check"),
    _i(key=f"{P}:table6", number="Table 6", kind="table",
       statement="(App. D) How Theorem 1 differs from earlier minimizer-inconsistency results.",
       coverage="none", checkable=False, note="a comparison of the literature's assumptions, no numbers"),
    _i(key=f"{P}:fig2", number="Figure 2", kind="figure",
       statement="SO NWP training curves: client AdaGrad beats client SGD and server-only AdaGrad.",
       coverage="none", checkable=False, note=_REAL),
    _i(key=f"{P}:fig3", number="Figure 3", kind="figure",
       statement="Client + server AdaGrad is less sensitive to the learning rates than server-only AdaGrad.",
       coverage="none", checkable=False, note=_REAL),
)
