"""Ditto's section of ``tff-noisy report`` (``variant: paper``): the clients' personal
models on their own held-out examples, beside the global model's test accuracy."""

from tff_noisy import reporting


class PersonalSection(reporting.LastRoundSection):
  round_keys = ('ditto_personal', 'personalized_accuracy', 'personalized_client_mean_accuracy')
  title = 'Ditto personalised accuracy'
  explanation = ("After the last round, every client that has trained its personal model "
                 "v_k, scored on the client's own held-out examples (true labels): pooled "
                 '(Σ correct / Σ tested, as Ditto reports it), the mean over the clients and '
                 "the variance of the clients' accuracies (Ditto's fairness figure); on the "
                 'observed labels for comparison.')
  columns = (('clients', 'clients'), ('test examples', 'test_examples'),
             ('accuracy', 'accuracy'), ('client mean', 'client_mean_accuracy'),
             ('variance', 'accuracy_variance'),
             ('on observed labels', 'accuracy_observed_labels'))

  def summary_line(self, last):
    if last.get('accuracy') is None:
      return None
    return (f'Ditto personalised accuracy {reporting.num(last.get("accuracy"))} (client mean '
            f'{reporting.num(last.get("client_mean_accuracy"))}, {last.get("clients")} '
            'clients, their own held-out examples)')


SECTIONS = (PersonalSection(),)
