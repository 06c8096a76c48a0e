"""The paper versions the registry's items are numbered against."""

from __future__ import annotations

from .model import Paper

__all__ = ["PAPERS"]

_PAPERS = (
    Paper("efl", "000", "Towards Heterogeneous Clients with Elastic Federated Learning",
          "Zichen Ma, Yu Lu, Zihan Lu, Wenye Li, Jinfeng Yi, Shuguang Cui", "arXiv preprint", 2021,
          "2106.09433", "version not printed",
          "EFL (text with LaTeX alt-text); the text prints no arXiv id or version: the id is the "
          "one listed for this title and author list; which version the seed is was not established.",
          reference="EFL"),
    Paper("local-adaptivity", "001", "Local Adaptivity in Federated Learning: Convergence and Consistency",
          "Jianyu Wang, Zheng Xu, Zachary Garrett, Zachary Charles, Luyang Liu, Gauri Joshi",
          "arXiv preprint", 2021, "2106.02305", "version not printed",
          "LocalAdaptivity; a draft with the authors' inline review notes and its equations lost in extraction "
          "(restated in our own notes); the text prints no arXiv id or version: the id is the one listed for "
          "this title and author list.",
          reference="LocalAdaptivity"),
    Paper("te-targets", "002", "Towards More Efficient Federated Learning with Better Optimization Objects",
          "Zirui Zhu, Ziyi Ye", "arXiv preprint", 2021, "2108.08577", "version not printed",
          "BetterObjects; the text prints no arXiv id or version: the id is the one listed for this title.",
          reference="BetterObjects"),
    Paper("elasticnet", "003", "Communication-Efficient and Drift-Robust Federated Learning via Elastic Net",
          "Seonhyeong Kim, Jiheon Woo, Daewon Seo, Yongjune Kim",
          "ICLR 2023 submission (OpenReview -59_mb1lOf4, rejected)", 2022, "2210.02940", "OpenReview submission",
          "FedElasticNet is the OpenReview record (sections as JSON plus the reviews, submitted anonymously); "
          "item numbers are those of that submission. arXiv:2210.02940 (v1, 6 Oct 2022, same title and "
          "authors, a different abstract) is another version and was not read.",
          reference="FedElasticNet"),
    Paper("scaffold-v1", "004",
          "SCAFFOLD: Stochastic Controlled Averaging for On-Device Federated Learning",
          "Sai Praneeth Karimireddy, Satyen Kale, Mehryar Mohri, Sashank J. Reddi, Sebastian U. Stich, "
          "Ananda Theertha Suresh", "arXiv preprint", 2019, "1910.06378", "v1",
          "SCAFFOLD-v1 is arXiv v1 (14 Oct 2019): Theorems 4 and 6 (strongly convex, without and with client "
          "sampling), Lemmas 1-5; the convex and non-convex cases are only announced as 'similar "
          "extensions'; "
          "equations lost in extraction. The seed is a page of arXiv v1 dated 14 Oct 2019.",
          reference="SCAFFOLD-v1"),
    Paper("scaffold-icml", "",
          "SCAFFOLD: Stochastic Controlled Averaging for Federated Learning",
          "Sai Praneeth Karimireddy, Satyen Kale, Mehryar Mohri, Sashank J. Reddi, Sebastian U. Stich, "
          "Ananda Theertha Suresh", "ICML 2020, PMLR 119:5132-5143", 2020, "1910.06378",
          "ICML 2020 proceedings",
          "Not a seed: the FedAvg bounds (Theorem I), the FedAvg lower bound (Theorem II), SCAFFOLD's "
          "convex/non-convex rates (Theorem III), the quadratic delta-similarity result (Theorem IV) and "
          "assumptions A1 (G, B)-BGD and A2 delta-BHD exist only in this version; they are entries of it.",
          reference="SCAFFOLD-ICML"),
)

PAPERS: dict[str, Paper] = {p.key: p for p in _PAPERS}
