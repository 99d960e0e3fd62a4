"""Packaging for beamtrove.

Kept as setup.py so Dataflow can stage the package with ``--setup_file``.
"""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(r'__version__ = "([^"]+)"', (HERE / "beamtrove" / "__init__.py").read_text()).group(1)

setup(
    name="beamtrove",
    version=VERSION,
    description="LLM pretraining data from web crawls on Apache Beam: read, extract, filter, dedup, tokenize.",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["beamtrove", "beamtrove.*"]),
    # The Slurm job scripts, filled in and printed by `beamtrove slurm submit` and `beamtrove elastic slurm-template`.
    package_data={"beamtrove.execution": ["*.sbatch"], "beamtrove.execution.jobs": ["*.sbatch"]},
    install_requires=[
        "apache-beam[gcp]==2.77.0",
        "charset-normalizer>=3.0",
        # fasttext-numpy2 and not another fastText wheel: the others break with numpy 2.
        "fasttext-numpy2==0.10.4",
        "fsspec>=2024.2",
        # DataTrove's FTFYFormatter.
        "ftfy>=6.1,<7",
        "gcsfs>=2024.2",
        # The ReadabilityInscriptis extractor lays the article out with inscriptis; its readerable check needs
        # cssselect's :has().
        "cssselect>=1.2",
        "inscriptis>=2.7,<3",
        "isal>=1.6",
        # trafilatura needs lxml's HTML cleaner, a separate project since lxml 5.2.
        "lxml_html_clean>=0.4",
        "numpy>=1.26",
        "orjson>=3.9",
        "pyahocorasick>=2.1",
        "pyarrow>=15",
        # The article finder DataTrove's ReadabilityInscriptis forks; 0.9 rewrote it.
        "readability-lxml==0.8.4.1",
        "regex>=2024.4",
        "resiliparse==0.15.2",
        "tldextract>=5.1",
        "tokenizers>=0.20",
        "trafilatura==2.3.1",
        "warcio>=1.7.4",
        # The 64-bit hash of DataTrove's decontamination indexes.
        "xxhash>=3",
        "zstandard>=0.22",
    ],
    extras_require={
        "s3": ["s3fs>=2024.2"],
        # DataTrove's own word splitting, for word statistics equal to its WordStats (--summary_word_splitter spacy).
        "spacy": ["spacy>=3.7,<4"],
        # Each language's word tokenizer, as DataTrove assigns them (--word_splitter language), those that work
        # offline. Not here: stanza (torch, and models to download), botok (downloads its dictionary on first use),
        # pyidaungsu-numpy2 (its fasttext-numpy2-wheel overwrites the fasttext module beamtrove's language ID
        # loads: pip install --no-deps pyidaungsu-numpy2 python-crfsuite emoji). kiwipiepy before 0.22, whose
        # models no longer hold the skip-bigram one DataTrove asks for.
        "multilingual": [
            "indic-nlp-library>=0.92",
            "jieba>=0.42",
            "khmer-nltk>=1.6",
            "kiwipiepy>=0.21,<0.22",
            "laonlp>=1.2",
            "pythainlp>=5.0",
            "pyvi>=0.1.1",
            "spacy>=3.7,<4",
            "sudachidict_core>=20240409",
            "sudachipy>=0.6.8",
        ],
        # English word frequencies, the default table of UnigramLogProbFilter.
        "unigram": ["wordfreq>=3.1,<4"],
        "test": ["matplotlib>=3.8", "pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.6"],
        # datasets builds the Hugging Face datasets the hf reader's tests read.
        "dev": [
            "datasets>=2.19",
            "dockerfile-parse==2.0.1",
            # The report's test reads chromium's screenshot of the page with its PNG reader.
            "matplotlib>=3.8",
            # The S3 server the object store tests run against (moto_server), and the S3 file system.
            "moto[server]>=5.2",
            "pytest>=8",
            "pytest-timeout>=2.3",
            "pytest-xdist>=3.6",
            "ruff==0.17.6",
            "s3fs>=2024.2",
            "spacy>=3.7,<4",
            "wordfreq>=3.1,<4",
            # Thai and Chinese words for the language splitter's tests: pure Python, quick to install; the other
            # languages' tests skip without their package (pip install -e '.[multilingual]').
            "jieba>=0.42",
            "pythainlp>=5.0",
        ],
    },
    entry_points={"console_scripts": ["beamtrove=beamtrove.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "License :: OSI Approved :: Apache Software License",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
