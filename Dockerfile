# domainbert image. CPU by default:
#   docker build -t domainbert .
#   docker run --rm -v "$PWD/runs:/app/runs" domainbert run science
# The image runs as the unprivileged user `domainbert` (uid 1000); give it a runs/ folder it can write
# (`mkdir -p runs`, owned by uid 1000, or `docker run --user "$(id -u):$(id -g)" ...`).
# GPU (CUDA): start from an image that already has Python and a CUDA build of torch, and skip the torch pin:
#   docker build -t domainbert:cuda --build-arg BASE_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime \
#       --build-arg TORCH_SPEC= .
#   docker run --rm --gpus all -v "$PWD/runs:/app/runs" domainbert:cuda run science --profile full
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

# torch is installed first and pinned; leave TORCH_SPEC empty when the base image brings its own torch.
# TORCH_INDEX_URL may point pip at a CPU-only wheel index for a smaller image.
ARG TORCH_SPEC="torch==2.13.0"
ARG TORCH_INDEX_URL=""

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    DOMAINBERT_HOME=/app \
    DO_NOT_TRACK=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120 \
    TOKENIZERS_PARALLELISM=false

RUN apt-get update && apt-get install -y --no-install-recommends build-essential git \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
RUN if [ -n "$TORCH_SPEC" ]; then \
        if [ -n "$TORCH_INDEX_URL" ]; then pip install "$TORCH_SPEC" --index-url "$TORCH_INDEX_URL"; \
        else pip install "$TORCH_SPEC"; fi; \
    fi

# Dependencies first (cached layer), then the project itself.
COPY pyproject.toml README.md constraints.txt ./
COPY src ./src
COPY flows ./flows
RUN pip install -c constraints.txt ".[all]"
COPY domains ./domains
COPY corpora ./corpora
COPY prefect.yaml* ./

# Not root: a compromised dependency or a crafted input cannot take over the container's host mounts as root.
RUN useradd --create-home --uid 1000 --shell /usr/sbin/nologin domainbert \
    && mkdir -p /app/runs && chown domainbert:domainbert /app/runs
USER domainbert

ENTRYPOINT ["domainbert"]
CMD ["--help"]
