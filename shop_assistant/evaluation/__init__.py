"""Answer evaluation, a product feature: the answers as shoppers read them (``answers``), the checker's
sentence labels (``sentences``), and the plain-word rules (``words``)."""
