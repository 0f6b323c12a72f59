FROM python:3.11-slim
WORKDIR /app
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 \
    XDG_CACHE_HOME=/opt/personae-cache
COPY pyproject.toml README.md requirements.lock ./
COPY bot ./bot
COPY memory ./memory
COPY models ./models
COPY migrations ./migrations
# CPU torch pinned first, so the local embedder does not drag in CUDA wheels. torch only exports the
# ONNX model once, here at build time; the bot runs it on onnxruntime and never imports torch. The
# lock pins every other version, as scripts/setup installs them.
RUN pip install -c requirements.lock "torch==2.13.0" && pip install -c requirements.lock '.[local]' \
    && python -m memory.recall.onnx_export
RUN mkdir /data && chown nobody /data
USER nobody
ENTRYPOINT ["personae"]
CMD ["run"]
