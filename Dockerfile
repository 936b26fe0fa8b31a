# domainbert image. CPU by default: torch from PyTorch's CPU wheel index, so no CUDA libraries ship in it.
#   docker build -t domainbert .
#   docker run --rm -v "$PWD/runs:/app/runs" domainbert run science
# The image runs as the unprivileged user `domainbert` (uid 1000); give it a runs/ folder it can write
# (`mkdir -p runs`, owned by uid 1000, or `docker run --user "$(id -u):$(id -g)" ...`).
# GPU (CUDA 12.8): the same image with torch from the CUDA wheel index:
#   docker build -t domainbert:cuda --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 .
#   docker run --rm --gpus all -v "$PWD/runs:/app/runs" domainbert:cuda run science --profile full
ARG PYTHON_IMAGE=python:3.11-slim

# --- build: compilers live here only ---------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# build-essential: a dependency without a wheel for this platform builds here, never in the final image
RUN apt-get update && apt-get install -y --no-install-recommends build-essential=12.* \
    && rm -rf /var/lib/apt/lists/* \
    && python -m venv /opt/venv
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"
WORKDIR /src
# The dependencies (pyproject's, and the extras the image offers, pinned by constraints.txt) before the sources:
# editing the code reuses this layer. torch is left out here: it came from the wheel index above.
COPY pyproject.toml constraints.txt scripts/image_requirements.py ./
RUN python image_requirements.py pyproject.toml > requirements.txt
RUN pip install -c constraints.txt -r requirements.txt
COPY README.md LICENSE ./
COPY src ./src
COPY flows ./flows
RUN pip install --no-deps .

# --- the image ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
# DL3064 reads "TOKEN" in TOKENIZERS_PARALLELISM as a secret; it is a setting
# hadolint ignore=DL3064
ENV PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    DOMAINBERT_HOME=/app \
    DO_NOT_TRACK=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120 \
    TOKENIZERS_PARALLELISM=false
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY domains ./domains
COPY corpora ./corpora
COPY prefect.yaml ./

# Not root: a compromised dependency or a crafted input cannot take over the container's host mounts as root.
RUN useradd --create-home --uid 1000 --shell /usr/sbin/nologin domainbert \
    && mkdir -p /app/runs && chown 1000:1000 /app/runs
USER 1000

ENTRYPOINT ["domainbert"]
CMD ["--help"]
