"""Runs a TFLite model in the TFLite interpreter and checks it against Keras."""

import numpy as np
import tensorflow as tf


def _quantize(x: np.ndarray, detail: dict) -> np.ndarray:
  """Float input -> the tensor's dtype (integers via scale and zero point)."""
  dtype = np.dtype(detail['dtype'])
  if not np.issubdtype(dtype, np.integer):
    return x.astype(dtype)
  scale, zero_point = detail['quantization']
  info = np.iinfo(dtype)
  return np.clip(np.round(x / scale + zero_point), info.min,
                 info.max).astype(dtype)


def _dequantize(y: np.ndarray, detail: dict) -> np.ndarray:
  if not np.issubdtype(np.dtype(detail['dtype']), np.integer):
    return y.astype(np.float32)
  scale, zero_point = detail['quantization']
  return ((y.astype(np.float32) - zero_point) * scale).astype(np.float32)


def run_tflite(tflite_bytes: bytes, x: np.ndarray, batch: int = 64,
               num_threads: int = 1) -> np.ndarray:
  """Float logits [N, C] of the TFLite model on float inputs ``x`` [N, ...].

  Runs ``batch`` examples per invocation (the last batch is zero-padded);
  integer input/output tensors are (de)quantised with their scale and zero
  point.
  """
  x = np.asarray(x, dtype=np.float32)
  interpreter = tf.lite.Interpreter(model_content=tflite_bytes,
                                    num_threads=num_threads)
  (input_detail,) = interpreter.get_input_details()
  interpreter.resize_tensor_input(input_detail['index'], [batch, *x.shape[1:]])
  interpreter.allocate_tensors()
  (output_detail,) = interpreter.get_output_details()
  outputs = []
  for start in range(0, len(x), batch):
    chunk = x[start:start + batch]
    padded = np.zeros((batch, *x.shape[1:]), np.float32)
    padded[:len(chunk)] = chunk
    interpreter.set_tensor(input_detail['index'],
                           _quantize(padded, input_detail))
    interpreter.invoke()
    logits = interpreter.get_tensor(output_detail['index'])[:len(chunk)]
    outputs.append(_dequantize(logits, output_detail))
  return np.concatenate(outputs)


def verify(model: tf.keras.Model, tflite_bytes: bytes, x_test: np.ndarray,
           y_test: np.ndarray, batch: int = 64) -> dict:
  """Top-1 agreement of Keras and TFLite, and both accuracies, on a test set."""
  y_test = np.asarray(y_test)
  keras_top1 = np.argmax(model.predict(x_test, batch_size=batch, verbose=0), -1)
  tflite_top1 = np.argmax(run_tflite(tflite_bytes, x_test, batch), -1)
  return {
      'agreement': float(np.mean(keras_top1 == tflite_top1)),
      'keras_accuracy': float(np.mean(keras_top1 == y_test)),
      'tflite_accuracy': float(np.mean(tflite_top1 == y_test)),
      'n': int(len(y_test)),
  }
