"""Items of SCAFFOLD (Karimireddy et al.): SCAFFOLD-v1 is arXiv v1 (1910.06378v1); the FedAvg bounds, the
lower bound, the convex / non-convex rates and the delta-similarity result exist only in the ICML 2020
version and are entries of that version."""

from __future__ import annotations

from functools import partial

from .model import Item

__all__ = ["ITEMS"]

V1 = "scaffold-v1"
ICML = "scaffold-icml"
_v1 = partial(Item, paper=V1)
_icml = partial(Item, paper=ICML)
TS = "tests/algorithms/test_scaffold.py::"
TB = "tests/theory/test_bounds_other.py::"
TSC = "tests/algorithms/test_scaffold_v1_special_cases.py::"
TR = "tests/theory/test_bounds_recursions.py::"
TD = "tests/experiments/test_scaffold_v1_claims.py::"
RC = "fltheory.theory.bounds.recursions."
_PROOF = "a proof step; its equations were lost in the text extraction and it is not evaluated on its own"

ITEMS: tuple[Item, ...] = (
    _v1(key=f"{V1}:smooth", number="sec. 2.2 (i), eq. 1, eq. 2", kind="assumption",
        statement="Each f_i is beta-smooth (and the consequences eq. 1-2 for convex f_i).",
        code=("fltheory.problems.QuadraticFederation.constants",),
        tests=("tests/problems/test_constants.py",),
        coverage="full"),
    _v1(key=f"{V1}:convex", number="sec. 2.2 (ii), eq. 3", kind="assumption",
        statement="Each f_i is mu-strongly convex.",
        code=("fltheory.problems.QuadraticFederation.constants",),
        tests=("tests/problems/test_constants.py",),
        coverage="full"),
    _v1(key=f"{V1}:noise", number="sec. 2.2 (iii), eq. 4", kind="assumption",
        statement="Independent unbiased stochastic gradients with variance at most sigma^2.",
        code=("fltheory.problems.QuadraticFederation.with_gradient_noise",),
        tests=("tests/problems/test_quadratic.py::test_gaussian_noise_variance_is_exact_sigma2",),
        coverage="full"),
    _v1(key=f"{V1}:invariant", number="sec. 2.3 (c = mean c_i)", kind="claim",
        statement="The server control variate is always the mean of the client control variates.",
        code=("fltheory.algorithms.Scaffold",),
        tests=(TS + "test_global_control_is_mean_of_client_controls",),
        coverage="full"),
    _v1(key=f"{V1}:alg1", number="Algorithm 1", kind="algorithm",
        statement="SCAFFOLD with client sampling: corrected local steps y <- y - eta_l (g - c_i + c), "
                  "control "
                  "update option I or II, server steps with global rate eta_g.",
        code=("fltheory.algorithms.Scaffold", "fltheory.algorithms.scaffold.scaffold_round"),
        tests=(TS + "test_fast_path_equals_reference_loop",
               TS + "test_fast_path_equals_reference_with_package_participation",
               TS + "test_full_in_order_exact_round_equals_reference_and_keeps_old_state"),
        coverage="full"),
    _v1(key=f"{V1}:alg2", number="Algorithm 2", kind="algorithm",
        statement="SCAFFOLD without sampling (every client every round).",
        code=("fltheory.algorithms.Scaffold",),
        tests=(TS + "test_fast_path_equals_reference_loop",
               TS + "test_affine_round_map_fixed_point_is_x_star"),
        coverage="full"),
    _v1(key=f"{V1}:eq5-7", number="eq. 5, eq. 6, eq. 7", kind="equation",
        statement="Local corrected step, control-variate options (I) grad f_i(x) or (II) c_i - c + "
                  "(x - y_i)/(K eta_l), and the global model / control updates.",
        code=("fltheory.algorithms.Scaffold",),
        tests=(TS + "test_option_two_control_is_mean_gradient_used",
               TS + "test_one_local_step_makes_options_one_and_two_equal",
               "tests/theory/test_round_maps.py::test_scaffold_round_map_is_the_per_client_loop"),
        coverage="full"),
    _v1(key=f"{V1}:fedavg-special", number="sec. 3 (c = 0)", kind="claim",
        statement="Removing the correction (c_i = c = 0 always) recovers FedAvg.",
        code=("fltheory.algorithms.Scaffold", "fltheory.algorithms.FedAvg"),
        tests=(TSC + "test_zero_controls_every_round_is_fedavg",),
        coverage="full", coverage_before="none",
        note="iterate for iterate (to 1e-14) over 15 rounds, with and without client sampling, with gradient "
             "noise, FedAvg with uniform averaging"),
    _v1(key=f"{V1}:output", number="eq. 8, eq. 13", kind="equation",
        statement="The output is a weighted average of the server iterates with positive weights w_r.",
        code=(RC + "constant_step_weights", RC + "weighted_output"),
        tests=(TR + "test_output_weights_are_positive_and_the_average_is_exact",
               TR + "test_constant_step_lemma_telescopes_and_gives_the_stated_rate"),
        coverage="partial", coverage_before="none",
        note="the weights w_r = (1 - a gamma)^{-(r+1)} of Lemma 5 and the weighted average are implemented and "
             "tested; runs still report the last iterate, and the averaged output's rate is not compared with "
             "runs"),
    _v1(key=f"{V1}:thm4", number="Theorem 4", kind="theorem",
        statement="Strongly convex, no sampling: rounds O~(sigma^2/(mu K N eps) + beta/mu), independent of "
                  "client heterogeneity.",
        hypotheses=("sec. 2.2 (i)-(iii)", "step sizes of Lemma 5"),
        code=("fltheory.theory.bounds.scaffold_rounds", "fltheory.theory.moments.scaffold_rounds_to_accuracy"),
        tests=(TB + "test_scaffold_rounds_formula_and_slopes",
               "tests/experiments/test_scaffold_drift.py::test_noise_rounds_are_the_first_round_below_eps_of_"
               "the_exact_moments",
               "tests/theory/test_moments_scaffold_fast.py::test_rounds_to_accuracy_read_off_the_exact_gaps"),
        checks=("scaffold_drift:scaffold-rounds", "scaffold_drift:scaffold-noise-rounds"),
        coverage="partial",
        note="with gradient noise the exact expected rounds to eps (best admissible local step) are checked for "
             "the order in 1/eps and independence of heterogeneity; the O~ hides constants and logs, so the "
             "exact / formula ratio is reported, not judged; the admissible local steps eta_l <= 1/(81 beta K) are "
             "SCAFFOLD-ICML Theorem III's (v1's own step conditions are lost in our text)"),
    _v1(key=f"{V1}:thm6", number="Theorem 6", kind="theorem",
        statement="Strongly convex with sampling (option II): rounds O~(sigma^2/(mu K S eps) + beta/mu + "
                  "N/S).",
        hypotheses=("sec. 2.2 (i)-(iii)", "1 <= S <= N", "step sizes of Lemmas 3-4"),
        code=("fltheory.theory.bounds.scaffold_rounds", "fltheory.theory.bounds.scaffold_step_conditions"),
        tests=(TB + "test_scaffold_rounds_formula_and_slopes", TB + "test_scaffold_step_conditions",
               TS + "test_reaches_x_star_with_client_sampling",
               "tests/experiments/test_scaffold_drift.py::test_noise_rounds_are_the_first_round_below_eps_of_"
               "the_exact_moments"),
        checks=("scaffold_drift:scaffold-rounds", "scaffold_drift:scaffold-noise-rounds"),
        coverage="partial",
        note="noise and sampling S < N are exercised on exact expectations (scaffold_drift: order in 1/eps, "
             "no heterogeneity term, exact / formula ratio reported); the N/S term is not swept over S; the local "
             "step range is SCAFFOLD-ICML Theorem III's (v1's own step conditions are lost in our text)"),
    _v1(key=f"{V1}:same-direction", number="sec. 4.1 (i)", kind="claim",
        statement="Aggregated over clients, SCAFFOLD's local update equals FedAvg's (the server direction "
                  "is unchanged).",
        code=("fltheory.algorithms.Scaffold", "fltheory.algorithms.FedAvg"),
        tests=("tests/algorithms/test_scaffold_v1_claims.py::test_one_local_step_aggregate_equals_fedavg_when_controls_average_to_c",),
        coverage="partial", coverage_before="none",
        note="exact for one local step (mean_i c_i = c cancels the corrections); for K > 1 the paper only "
             "says 'similar' and nothing is measured"),
    _v1(key=f"{V1}:drift", number="sec. 4.1 (ii)", kind="claim",
        statement="The drift of SCAFFOLD's local iterates is bounded by terms that vanish near the optimum, "
                  "independently of heterogeneity.",
        code=("experiments.scaffold_v1_claims.drift_bound", "experiments.scaffold_v1_claims.local_drift"),
        tests=(TD + "test_drift_bound_by_hand_on_one_scalar_client_pair",
               TD + "test_drift_is_zero_at_the_optimum_with_converged_controls_and_fedavg_drift_grows_as_h_squared",
               TD + "test_local_iterates_are_the_scaffold_round"),
        checks=("scaffold_v1_claims:drift-bound", "scaffold_v1_claims:drift-vanishes"),
        coverage="partial", coverage_before="none",
        note="the printed drift inequality (4.1) is lost in the seed's text; checked against our bound "
             "||y_{i,k} - x|| <= eta ||v_i|| sum_{j<k} q_i^j, v_i = H_i (x - x*) + (c_i* - c_i) + c, on "
             "quadratic clients (no heterogeneity term, attained at k = 1), and SCAFFOLD's drift measured to "
             "vanish while FedAvg's grows like h^2"),
    _v1(key=f"{V1}:fixed-point", number="sec. 4.1 (fixed point)", kind="claim",
        statement="Unlike FedAvg, the optimum x* is a fixed point of SCAFFOLD (up to gradient noise).",
        code=("fltheory.theory.affine_round_map", "fltheory.theory.fixed_point"),
        tests=(TS + "test_affine_round_map_fixed_point_is_x_star",
               TS + "test_reaches_x_star_where_fedavg_stalls",
               "tests/theory/test_affine.py::test_scaffold_fixed_point_is_the_optimum"),
        checks=("scaffold_drift:scaffold-fixed-point",),
        coverage="full"),
    _v1(key=f"{V1}:fedavg-drift", number="sec. 1 (client drift)", kind="claim",
        statement="With heterogeneous clients FedAvg's local updates drift towards the client optima, so its "
                  "fixed point differs from x* (distance growing with heterogeneity).",
        code=("fltheory.theory.fedopt_quadratic_fixed_point",),
        tests=("tests/experiments/test_scaffold_drift.py::test_fedavg_fixed_point_matches_closed_form",),
        checks=("scaffold_drift:fedavg-drift",),
        coverage="full"),
    _v1(key=f"{V1}:lemma1", number="Lemma 1", kind="lemma",
        statement="One-round progress of any method satisfying (4.1), with a drift term.",
        hypotheses=("f_i mu-strongly convex and beta-smooth", "eta~ = K eta_l eta_g <= 1/(4 beta)",
                    "server step = -eta~ times the mean local gradient (4.1)"),
        code=("experiments.scaffold_v1_claims.one_round_progress",),
        tests=(TD + "test_server_step_is_minus_eta_tilde_times_the_mean_local_gradient",
               TD + "test_lemma1_check_flags_a_failing_round"),
        checks=("scaffold_v1_claims:lemma1",),
        coverage="partial", coverage_before="none",
        note="the printed inequality is lost; checked in a deterministic form we derive (||x+ - x*||^2 <= "
             "(1 - mu eta~/2)||x - x*||^2 - eta~ (F(x) - F*) + 3 beta eta~ E_r for eta~ <= 1/(4 beta)) round by "
             "round on SCAFFOLD and FedAvg runs, full participation, no gradient noise; the noise and sampling "
             "terms are not evaluated"),
    _v1(key=f"{V1}:lemma2", number="Lemma 2", kind="lemma",
        statement="Bounded drift of SCAFFOLD (option I) without sampling.",
        code=("experiments.scaffold_v1_claims.drift_bound",),
        tests=(TD + "test_drift_bound_by_hand_on_one_scalar_client_pair",),
        checks=("scaffold_v1_claims:drift-bound",),
        coverage="partial", coverage_before="none",
        note="the printed inequality is lost; the drift it bounds is checked (options I and II, full "
             "participation) against our bound (D) by ||x - x*|| and the control errors (see sec. 4.1 (ii)); "
             "the lemma's own constants and step-size condition are not evaluated"),
    _v1(key=f"{V1}:lemma3", number="Lemma 3", kind="lemma",
        statement="One-round progress with sampling, tracking the control-variate error.",
        coverage="none", note=_PROOF),
    _v1(key=f"{V1}:lemma4", number="Lemma 4", kind="lemma",
        statement="Bounded drift with sampling, with a step-size cap depending on S/N.",
        code=("fltheory.theory.bounds.scaffold_step_conditions",),
        checks=("scaffold_drift:scaffold-step-conditions",),
        coverage="partial",
        note="only its step-size caps are checked (with the constants of the ICML version); the drift "
             "bound itself is not evaluated"),
    _v1(key=f"{V1}:lemma5", number="Lemma 5", kind="lemma",
        statement="Unrolling a non-negative recursion with constant step and weights gives the "
                  "O~(exp(-mu R) + noise/(mu R)) rate.",
        code=(RC + "constant_step_weights", RC + "constant_step_choice", RC + "constant_step_bound",
              RC + "constant_step_rate"),
        tests=(TR + "test_constant_step_lemma_telescopes_and_gives_the_stated_rate",
               TR + "test_constant_step_identity_is_tight_when_b_is_zero"),
        coverage="partial", coverage_before="none",
        note="the printed inequality is lost; checked in our explicit form (the telescoped bound "
             "(r_0/gamma) exp(-a gamma (T+1)) + c gamma and, with gamma = min(1/d, ln M/(a T)), "
             "d r_0 exp(-a (T+1)/d) + (c/(a T))(ln M + 1/ln 2), both derived) on worst-case sequences"),
    _v1(key=f"{V1}:eq9-12", number="eq. 9, eq. 10, eq. 11, eq. 12", kind="equation",
        statement="Sampling version: every client's virtual update, option II controls, only sampled clients "
                  "update their controls, the server averages the S sampled updates.",
        code=("fltheory.algorithms.Scaffold",),
        tests=(TS + "test_reaches_x_star_with_client_sampling",
               TS + "test_fast_path_equals_reference_with_package_participation"),
        coverage="full"),
    _v1(key=f"{V1}:saga", number="sec. 5 (SAGA, SGD)", kind="claim",
        statement="With N large, S = 1, K = 1 and eta_g = 1 SCAFFOLD is SAGA; with N = 1 it is SGD.",
        code=("fltheory.algorithms.Scaffold", "fltheory.algorithms.reference.saga.saga_iterates"),
        tests=("tests/algorithms/test_scaffold_v1_claims.py::test_with_one_client_scaffold_is_local_gradient_descent",
               TSC + "test_one_client_one_step_unit_global_rate_is_saga",
               TSC + "test_saga_loop_by_hand_on_two_scalar_clients",
               TSC + "test_saga_equivalence_needs_c_to_be_the_mean_of_the_client_controls"),
        coverage="full", coverage_before="none",
        note="SAGA written from Defazio et al. (2014) equals SCAFFOLD (S = 1, K = 1, eta_g = 1, options I and "
             "II) to 1e-14 over 200 steps, from a zero gradient table and from SAGA's table at x0 (N = 20: the "
             "equivalence is exact for every N); N = 1 is local GD exactly. The section's equations are lost in our "
             "text: the equivalence is derived (K = 1 makes options I and II coincide; it needs c = mean of the "
             "c_i, which a start that breaks it shows)"),
    _v1(key=f"{V1}:sampling-unbiased", number="sec. 6.1 (i)", kind="claim",
        statement="In expectation over the client sampling, the update equals the full-participation "
                  "(FedAvg) one.",
        code=("fltheory.algorithms.Scaffold",),
        tests=("tests/algorithms/test_scaffold_v1_claims.py::test_sampling_is_unbiased_for_the_server_model",),
        coverage="full", coverage_before="none",
        note="exact expectation of the server model over all S-subsets, one round from a state with "
             "non-zero controls"),
    _v1(key=f"{V1}:sampling-drift", number="sec. 6.1 (ii)", kind="claim",
        statement="With sampling the drift bound gains a term in the control-variate error.",
        code=("experiments.scaffold_v1_claims.drift_bound",),
        tests=(TD + "test_quick_run_checks_hold_and_a_broken_bound_is_flagged",),
        checks=("scaffold_v1_claims:sampling-drift",),
        coverage="partial", coverage_before="none",
        note="the printed inequality (6.1) is lost; our bound with the control errors c_i - c_i* of stale "
             "(unsampled) clients holds along option-II runs with uniform sampling and the drift vanishes"),
    _icml(key=f"{ICML}:a1", number="Assumption A1", kind="assumption",
          statement="(G, B)-bounded gradient dissimilarity: (1/N) sum ||grad f_i(x)||^2 <= G^2 + B^2 ||grad "
                    "f(x)||^2.",
          code=("fltheory.problems.QuadraticFederation.constants",),
          tests=(TB + "test_from_problem_constants_conveniences",),
          coverage="partial", note="G^2 and B^2 are computed for quadratics; not measured along runs"),
    _icml(key=f"{ICML}:a2", number="Assumption A2", kind="assumption",
          statement="delta-bounded Hessian dissimilarity: ||hess f_i(x) - hess f(x)|| <= delta.",
          code=("fltheory.problems.QuadraticFederation.constants",),
          tests=("tests/problems/test_constants.py",),
          coverage="full"),
    _icml(key=f"{ICML}:thm1", number="Theorem I", kind="theorem",
          statement="FedAvg rounds under (G, B)-BGD: strongly convex O~(sigma^2/(mu K S eps) + (1 - S/N) "
                    "G^2/(mu S eps) + sqrt(beta) G/(mu sqrt(eps)) + B^2 beta/mu), plus convex and non-convex "
                    "rates.",
          code=("fltheory.theory.bounds.fedavg_rounds",
                "fltheory.theory.bounds.fedavg_rounds_from_constants"),
          tests=(TB + "test_fedavg_rounds_and_lower_bound",),
          checks=("scaffold_drift:fedavg-rounds-order",),
          coverage="partial",
          note="only the strongly convex order in G (a slope); the convex and non-convex rates are not "
               "evaluated"),
    _icml(key=f"{ICML}:thm2", number="Theorem II", kind="theorem",
          statement="FedAvg lower bound: for K >= 2, sigma = 0 there are functions with F(x_R) - F* >= "
                    "Omega(G^2/(mu R^2)) for any step sizes.",
          code=("fltheory.theory.bounds.fedavg_lower_bound",
                "fltheory.theory.bounds.fedavg_hard_instance.hard_instance_best_error"),
          tests=(TB + "test_fedavg_rounds_and_lower_bound",
                 "tests/theory/test_bounds_fedavg_hard_instance.py::test_closed_form_is_the_readable_fedavg_loop",
                 "tests/theory/test_bounds_fedavg_hard_instance.py::"
                 "test_best_step_beats_a_brute_force_grid_and_decays_no_faster_than_one_over_R_squared"),
          checks=("fedavg_hard_instance:order", "scaffold_drift:fedavg-lower-bound"),
          coverage="full", coverage_before="partial",
          note="on a hard two-client instance (f_1 = mu x^2 + G x, f_2 = -G x; our reading of the paper's "
               "construction, not verified against the ICML text) the best-step error decays no faster than "
               "1/R^2 (constant about 0.9 for K = 2); generic quadratics (scaffold_drift) are not hard "
               "instances (not checkable there)"),
    _icml(key=f"{ICML}:thm3", number="Theorem III", kind="theorem",
          statement="SCAFFOLD rounds: strongly convex O~(sigma^2/(mu K S eps) + beta/mu + N/S) with "
                    "eta_l <= 1/(81 beta K eta_g), eta_g >= 1, R >= max(162 beta/mu, 30 N/S); convex and "
                    "non-convex rates.",
          code=("fltheory.theory.bounds.scaffold_rounds", "fltheory.theory.bounds.scaffold_step_conditions"),
          tests=(TB + "test_scaffold_rounds_formula_and_slopes", TB + "test_scaffold_step_conditions",
                 "tests/experiments/test_scaffold_drift.py::test_every_step_condition_status_is_reported"),
          checks=("scaffold_drift:scaffold-rounds", "scaffold_drift:scaffold-step-conditions"),
          coverage="partial",
          note="strongly convex, deterministic, full participation only; convex / non-convex rates not "
               "evaluated"),
    _icml(key=f"{ICML}:thm4", number="Theorem IV", kind="theorem",
          statement="Quadratics with delta-BHD: SCAFFOLD rounds O~(beta sigma^2/(mu K N eps) + (beta + delta "
                    "K)/(mu K)).",
          code=("fltheory.theory.bounds.scaffold_quadratic_rounds",),
          tests=(TB + "test_scaffold_rounds_formula_and_slopes",),
          coverage="partial", note="formula only; not compared with runs at varying delta and K"),
)
