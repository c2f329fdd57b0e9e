"""Feature logging: the first stage's candidates labelled from the judgments
(``candidates``) and their features logged through ``sltr`` + ``ltr_log``
(``featurelog``)."""
