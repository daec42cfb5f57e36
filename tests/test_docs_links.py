"""The docs a clone carries: every link and named path resolves inside the repository, and
no committed doc, report or benchmark result names a directory of the machine that wrote
it. Plain file reading (no TensorFlow), so it runs in the fast tier."""

import glob
import json
import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
# Top-level folders of the repository: a doc naming `tff_noisy/...` means this tree.
TOP_LEVEL = ('tff_noisy', 'experiments', 'docs', 'benchmarks', 'models', 'tests',
             'tflite_export', 'scripts')
# Absolute paths a user needs and the docs may name: the Debian dataset packages' folder
# (see docs/guide.md, "Datasets") and the usual device files.
SYSTEM_PATHS = ('/usr/share/datasets/', '/dev/null', '/proc/')
# Where docs/architecture.md's worked example of a new method would go: not in the tree.
EXAMPLE_PATHS = ('tff_noisy/methods/taylor_ce/',)


def _committed(*patterns) -> list:
  """Repository files matching the git pathspecs (the files a clone has)."""
  try:
    out = subprocess.run(['git', 'ls-files', '--', *patterns], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
  except (OSError, subprocess.CalledProcessError):  # An exported tree without git.
    out = [os.path.relpath(p, ROOT) for pattern in patterns
           for p in glob.glob(os.path.join(ROOT, pattern), recursive=True)
           if os.path.isfile(p)]
  return sorted(set(out))


DOCS = _committed('README.md', 'docs/*.md', 'docs/**/*.md')


def _text(path: str) -> str:
  with open(os.path.join(ROOT, path), encoding='utf-8') as f:
    return f.read()


def _prose(text: str) -> str:
  """The text without fenced code blocks' language tags or HTML comments (kept: the code
  itself, whose paths must exist as well)."""
  return re.sub(r'<!--.*?-->', '', text, flags=re.S)


def slug(heading: str) -> str:
  """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
  text = re.sub(r'`|\*\*|\*|_(?=\W)|(?<=\W)_', '', heading.strip().lower())
  text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)  # A link keeps its words.
  text = re.sub(r'[^\w\- ]', '', text)
  return text.replace(' ', '-')


def anchors(path: str) -> set:
  """The anchors of a markdown file's headings (repeated ones numbered as GitHub does)."""
  found, seen = set(), {}
  in_code = False
  for line in _text(path).splitlines():
    if line.startswith('```'):
      in_code = not in_code
    if in_code:
      continue
    match = re.match(r'#{1,6} (.+)', line)
    if match:
      base = slug(match.group(1))
      count = seen.get(base, 0)
      seen[base] = count + 1
      found.add(base if count == 0 else f'{base}-{count}')
  return found


def links(path: str) -> list:
  """(target, anchor) of every relative markdown link and image in ``path``."""
  out = []
  for target in re.findall(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)', _prose(_text(path))):
    if re.match(r'[a-z][a-z0-9+.-]*:', target):  # http:, https:, mailto:
      continue
    file_part, _, anchor = target.partition('#')
    out.append((file_part, anchor))
  return out


def named_paths(path: str) -> list:
  """Repository paths a doc names in its text or code (``tff_noisy/...``, ``docs/...``)."""
  pattern = (r'(?<![\w./~$-])((?:' + '|'.join(TOP_LEVEL) +
             r')/[\w./*<>-]*)')
  names = []
  for name in re.findall(pattern, _prose(_text(path))):
    name = name.rstrip('.,;:)')
    names.append(name)
  return names


def _exists(name: str) -> bool:
  """``name`` exists under the repository. Placeholders (``<method>``, ``CONFIG``) and
  globs (``runtimes_*.json``) match any name."""
  if name in EXAMPLE_PATHS:
    return True
  name = re.sub(r'<[^>]*>', '*', name)
  name = re.sub(r'(?<![^/])[A-Z][A-Z_]+(?=\.|/|$)', '*', name)  # PAPER.yaml, CONFIG.yaml
  if '*' in name:
    return bool(glob.glob(os.path.join(ROOT, name)))
  full = os.path.normpath(os.path.join(ROOT, name))
  return full.startswith(ROOT + os.sep) and os.path.exists(full)


def test_the_docs_are_found():
  assert 'README.md' in DOCS and 'docs/guide.md' in DOCS
  assert 'docs/papers/fedefc.md' in DOCS
  assert any(p.startswith('docs/papers/reports/') for p in DOCS)


@pytest.mark.parametrize('doc', DOCS)
def test_every_relative_link_resolves_inside_the_repository(doc):
  folder = os.path.dirname(os.path.join(ROOT, doc))
  broken = []
  for target, anchor in links(doc):
    full = os.path.normpath(os.path.join(folder, target)) if target else os.path.join(ROOT, doc)
    if not full.startswith(ROOT + os.sep) or not os.path.exists(full):
      broken.append(f'{target} (no such file in the repository)')
    elif anchor and full.endswith('.md') and anchor not in anchors(os.path.relpath(full, ROOT)):
      broken.append(f'{target}#{anchor} (no such heading)')
  assert not broken, f'{doc}: ' + '; '.join(broken)


@pytest.mark.parametrize('doc', DOCS)
def test_every_repository_path_a_doc_names_exists(doc):
  missing = sorted({name for name in named_paths(doc) if not _exists(name)})
  assert not missing, f'{doc} names paths the repository does not have: {missing}'


def test_the_checks_catch_what_they_are_for(tmp_path, monkeypatch):
  """A dead link, a missing heading and a missing path are found (the tests above can
  fail)."""
  assert slug("What the code implements, and how the paper's ambiguities were resolved") == (
      'what-the-code-implements-and-how-the-papers-ambiguities-were-resolved')
  assert slug('`make demo`') == 'make-demo'
  assert 'make-demo' in anchors('docs/results.md')
  monkeypatch.setattr(__import__(__name__), '_text', lambda path: (
      '[a](results.json) [b](guide.md#no-such-heading) [c](https://example.org/x) '
      'see `tff_noisy/no_such_module.py` and docs/papers/fedefc.md'))
  assert links('docs/x.md') == [('results.json', ''), ('guide.md', 'no-such-heading')]
  assert named_paths('docs/x.md') == ['tff_noisy/no_such_module.py', 'docs/papers/fedefc.md']
  assert not _exists('tff_noisy/no_such_module.py') and _exists('docs/papers/fedefc.md')
  assert _exists('tff_noisy/methods/<name>/') and _exists('benchmarks/results/runtimes_*.json')
  assert _exists('experiments/protocols/PAPER.yaml') and not _exists('experiments/PAPER.txt')
  assert not _exists('tests/methods/test_<method>.txt')


# Committed artefacts a user reads: docs, reports with their manifests and tables,
# benchmark results, configs and protocols.
ARTEFACTS = _committed('README.md', 'docs/**', 'benchmarks/results/*', 'experiments/**')
FIGURES = ('.png', '.pdf')  # Binary; the report writes no path or date into them.
ABSOLUTE = re.compile(r'(?<![\w.~:/-])((?:/[\w.-]+){2,}/?)')


def machine_paths(text: str) -> list:
  """Absolute filesystem paths in ``text`` other than the system ones a user needs."""
  return [p for p in ABSOLUTE.findall(text)
          if not any(p.startswith(s) or p + '/' == s for s in SYSTEM_PATHS)]


def test_machine_paths_are_recognised():
  assert machine_paths('Directory: `/work/exp2/runs/demo`.') == ['/work/exp2/runs/demo']
  assert machine_paths('"data.cache_dir=/tmp/bcache"') == ['/tmp/bcache']
  assert machine_paths('"config": "/root/repo/experiments/configs/demo.yaml"')
  assert machine_paths('from `/usr/share/datasets/fashion-mnist`, 1/2 of it, '
                       '</details>, https://github.com/a/b, ~/.cache/x') == []


@pytest.mark.parametrize('path', [p for p in ARTEFACTS if not p.endswith(FIGURES)])
def test_no_committed_artefact_names_a_directory_of_the_machine_that_wrote_it(path):
  text = _text(path)
  if path.endswith('.json'):
    json.loads(text)  # Still valid after any hand edit.
  found = machine_paths(text)
  assert not found, f'{path}: {found}'


def test_nothing_cites_files_a_clone_does_not_have():
  """The implementation specs and paper texts the project was built from are not in the
  repository: code and docs cite the paper pages (docs/papers/) and the papers."""
  pattern = re.compile(r'(?<![\w-])spec' + r's/\w+\.md|\.\./shar' + r'ed/')
  files = [p for p in _committed('README.md', 'docs/**', 'experiments/**', 'tff_noisy/**',
                                 'benchmarks/**', 'models/**', 'tests/**', 'tflite_export/**')
           if p.endswith(('.md', '.py', '.yaml', '.json', '.csv'))]
  assert len(files) > 100
  citing = [p for p in files if pattern.search(_text(p))]
  assert not citing, citing
